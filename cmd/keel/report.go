package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/report"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

type reportFlags struct {
	db      string
	auditDB string
	since   string
	out     string
	format  string
}

func reportCmd() *cobra.Command {
	var f reportFlags
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Write the transparency report from the request log",
		Long: `Read the request log (keel serve's SQLite file) and write the transparency
report: requests and the share fragmented, the calls on the plain path to
the primary model (rollout monitor stage apart from an open safety valve),
fallbacks by reason and by model/region, the normaliser's temperature
offsets, latency percentiles per hour, hedging and retry amplification, cost
by model with the overhead of hedge losers and redundant attempts (each
priced from its own tokens), errors by mesh_error_code and HTTP status, and,
when the personal-data audit log exists (--audit-db, default keel-audit.db),
the values found by kind, action and outcome (never a value).

--format is html (self-contained, inline SVG charts), md or json; without
it the format follows --out's extension (.html, .md, .json), else html.
The log is opened read-only; it may be in use by a running keel serve.`,
		Example: "  keel report --since 720h --out report.html\n  keel report --db /var/lib/keel/requests.db --since 24h --format md",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return badInput(fmt.Errorf("report takes no arguments, got %q", args[0]))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReport(cmd, &f, time.Now())
		},
	}
	cmd.Flags().StringVar(&f.db, "db", sqlite.DefaultPath, "request log file")
	cmd.Flags().StringVar(&f.auditDB, "audit-db", sqlite.DefaultAuditPath, "personal-data audit log file (its section is left out when the default file is absent)")
	cmd.Flags().StringVar(&f.since, "since", "720h", "report on the requests of this last duration (e.g. 24h, 720h, 30d)")
	cmd.Flags().StringVar(&f.out, "out", "", "output file (default: standard output)")
	cmd.Flags().StringVar(&f.format, "format", "", "html, md or json (default: from --out's extension, else html)")
	return cmd
}

func runReport(cmd *cobra.Command, f *reportFlags, now time.Time) error {
	window, err := parseSince(f.since)
	if err != nil {
		return badInput(err)
	}
	format, err := reportFormat(f.format, f.out)
	if err != nil {
		return badInput(err)
	}
	rd, err := sqlite.OpenReader(f.db)
	if err != nil {
		return badInput(fmt.Errorf("--db: %w", err))
	}
	defer rd.Close()
	since := now.Add(-window)
	rep, err := report.Build(rd.Query(cmd.Context(), since), report.Options{Since: since, Now: func() time.Time { return now },
		Prices: pricing.New(nil).Lookup}) // built-in list prices: what the prompt cache saved
	if err != nil {
		return fmt.Errorf("building report from %s: %w", f.db, err)
	}
	if rep.Audit, err = auditSummary(cmd, f.auditDB, since); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := report.Render(&buf, rep, format); err != nil {
		return fmt.Errorf("rendering report: %w", err)
	}
	if f.out == "" {
		_, err := io.Copy(cmd.OutOrStdout(), &buf)
		return err
	}
	if err := os.WriteFile(f.out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s\n", f.out, rep)
	return nil
}

// auditSummary reads the audit log's section; nil when the log is absent
// and --audit-db was not given.
func auditSummary(cmd *cobra.Command, path string, since time.Time) (*report.Audit, error) {
	if _, err := os.Stat(path); err != nil && !cmd.Flags().Changed("audit-db") {
		return nil, nil
	}
	rd, err := sqlite.OpenAuditReader(path)
	if err != nil {
		return nil, badInput(fmt.Errorf("--audit-db: %w", err))
	}
	defer rd.Close()
	counts, err := rd.Summary(cmd.Context(), since)
	if err != nil {
		return nil, err
	}
	n, err := rd.Requests(cmd.Context(), since)
	if err != nil {
		return nil, err
	}
	return report.NewAudit(n, counts), nil
}

// parseSince reads --since: a positive Go duration, or a whole number of
// days ("30d").
func parseSince(s string) (time.Duration, error) {
	bad := fmt.Errorf("--since: want a duration such as 720h, got %q", s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 100*365 {
			return 0, bad
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, bad
	}
	return d, nil
}

// reportFormat is --format, or the format --out's extension names, or html.
func reportFormat(format, out string) (string, error) {
	if format == "" {
		switch strings.ToLower(filepath.Ext(out)) {
		case ".md", ".markdown":
			return "md", nil
		case ".json":
			return "json", nil
		}
		return "html", nil
	}
	if !slices.Contains(report.Formats, format) {
		return "", fmt.Errorf("--format: want html, md or json, got %q", format)
	}
	return format, nil
}
