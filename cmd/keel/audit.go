package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

type auditFlags struct {
	config, db, since, format, out string
	filter                         sqlite.AuditFilter
	value                          string
}

func auditCmd() *cobra.Command {
	var f auditFlags
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Query and export the personal-data audit log",
		Long: `Read the audit log keel serve writes when pii.enabled (pii.audit.path, default
keel-audit.db): one row per personal-data value found in a request — time,
request id, virtual key and team, model, action (redact, mask, block, log),
outcome (sent, blocked, unavailable, sent_unscanned), kind, where it was
(which text, byte offsets) and the HMAC-SHA256 of the value. The log never
holds a value; --value finds the rows of one by hashing it with the log's key
(pii.audit.hash_key when the config sets it).

--format is table (default), csv or json. The log is opened read-only.`,
		Example: "  keel audit --since 24h --kind EMAIL\n  keel audit --team search --format csv --out audit.csv\n  keel audit --value alice@example.com --config keel.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAudit(cmd, &f, time.Now())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "Keel config file: use its pii.audit.path and hash_key")
	fl.StringVar(&f.db, "db", sqlite.DefaultAuditPath, "audit log file (when --config names none)")
	fl.StringVar(&f.since, "since", "720h", "rows of this last duration (e.g. 24h, 30d)")
	fl.StringVar(&f.filter.RequestID, "request-id", "", "only this request")
	fl.StringVar(&f.filter.KeyID, "key", "", "only this virtual key id")
	fl.StringVar(&f.filter.Team, "team", "", "only this team")
	fl.StringVar(&f.filter.Kind, "kind", "", "only this kind (EMAIL, PHONE, CARD, …)")
	fl.StringVar(&f.filter.Hash, "hash", "", "only this value hash")
	fl.StringVar(&f.value, "value", "", "only this value (hashed with the log's key; never stored)")
	fl.IntVar(&f.filter.Limit, "limit", 0, "at most this many rows (0: all)")
	fl.StringVar(&f.format, "format", "table", "table, csv or json")
	fl.StringVar(&f.out, "out", "", "output file (default: standard output)")
	return cmd
}

func runAudit(cmd *cobra.Command, f *auditFlags, now time.Time) error {
	window, err := parseSince(f.since)
	if err != nil {
		return badInput(err)
	}
	if f.format != "table" && f.format != "csv" && f.format != "json" {
		return badInput(fmt.Errorf("--format: want table, csv or json, got %q", f.format))
	}
	path, key := f.db, []byte(nil)
	if f.config != "" {
		cfg, err := config.Load(f.config)
		if err != nil {
			return badInput(err)
		}
		if cfg.PII.Audit.Path != "" {
			path = cfg.PII.Audit.Path
		}
		key = []byte(cfg.PII.Audit.HashKey.Value())
	}
	rd, err := sqlite.OpenAuditReader(path)
	if err != nil {
		return badInput(fmt.Errorf("--db: %w", err))
	}
	defer rd.Close()
	ctx := cmd.Context()
	if f.value != "" {
		if len(key) == 0 {
			if key, err = rd.HashKey(ctx); err != nil {
				return err
			}
		}
		if len(key) == 0 {
			return badInput(fmt.Errorf("--value: the log stores no hash key (pii.audit.hash_key is set): pass --config"))
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(f.value))
		f.filter.Hash = hex.EncodeToString(mac.Sum(nil))
	}
	f.filter.Since = now.Add(-window)
	rows, err := rd.Rows(ctx, f.filter)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if f.out != "" {
		file, err := os.Create(f.out)
		if err != nil {
			return fmt.Errorf("writing audit export: %w", err)
		}
		defer file.Close()
		w = file
	}
	if err := writeAudit(w, rows, f.format); err != nil {
		return fmt.Errorf("writing audit export: %w", err)
	}
	if f.out != "" {
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d rows\n", f.out, len(rows))
	}
	return nil
}

var auditColumns = []string{"time", "request_id", "key_id", "team", "model", "action", "outcome", "kind", "location", "start", "end", "hash"}

func auditRecord(r sqlite.AuditRow) []string {
	return []string{r.Time.Format(time.RFC3339Nano), r.RequestID, r.KeyID, r.Team, r.Model, r.Action, r.Outcome, r.Kind, r.Location,
		strconv.Itoa(r.Start), strconv.Itoa(r.End), r.Hash}
}

func writeAudit(w io.Writer, rows []sqlite.AuditRow, format string) error {
	switch format {
	case "json":
		if rows == nil {
			rows = []sqlite.AuditRow{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(auditColumns)
		for _, r := range rows {
			cw.Write(auditRecord(r))
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tREQUEST\tKEY\tTEAM\tMODEL\tACTION\tOUTCOME\tKIND\tWHERE\tBYTES\tHASH")
	for _, r := range rows {
		h := r.Hash
		if len(h) > 16 {
			h = h[:16] + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d-%d\t%s\n", r.Time.Format(time.RFC3339), r.RequestID, r.KeyID, r.Team, r.Model,
			r.Action, r.Outcome, r.Kind, r.Location, r.Start, r.End, h)
	}
	return tw.Flush()
}
