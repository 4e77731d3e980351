package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelmesh/keel/internal/shadow"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

func shadowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shadow",
		Short: "Shadow comparison: what the shadow paths answered differently",
		Long: `Shadow comparison sends a share of an alias's calls (aliases[].shadow in the
config) also on a shadow path — another model, another alias or the legacy
path — and diffs the answers. The comparisons are stored in shadow.store.`,
	}
	cmd.AddCommand(shadowReportCmd())
	return cmd
}

type shadowFlags struct {
	db, since, alias, format string
}

func shadowReportCmd() *cobra.Command {
	var f shadowFlags
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Summarise the stored shadow comparisons",
		Long: `Read the shadow store (shadow.store) and print, per JSON field, how many
comparisons had it, the share where the shadow's value differed and how
(numeric_delta, missing, extra, type_change, value_change), the distribution
of the numeric deltas (|shadow − primary|: min, p50, p90, max), the
decision rule's agreement between the paths (the share of calls where
rule(primary) == rule(shadow)), and the similarity of answers compared as
text. The store is opened read-only; a running keel serve may be writing it.`,
		Example: "  keel shadow report --db keel-shadow.db --since 24h\n  keel shadow report --alias risk --format json",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return badInput(fmt.Errorf("shadow report takes no arguments, got %q", args[0]))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runShadowReport(cmd, &f, time.Now())
		},
	}
	cmd.Flags().StringVar(&f.db, "db", "keel-shadow.db", "shadow store file (shadow.store)")
	cmd.Flags().StringVar(&f.since, "since", "720h", "report on the comparisons of this last duration (e.g. 24h, 30d)")
	cmd.Flags().StringVar(&f.alias, "alias", "", "one alias's comparisons (default: every alias)")
	cmd.Flags().StringVar(&f.format, "format", "text", "text or json")
	return cmd
}

func runShadowReport(cmd *cobra.Command, f *shadowFlags, now time.Time) error {
	window, err := parseSince(f.since)
	if err != nil {
		return badInput(err)
	}
	if f.format != "text" && f.format != "json" {
		return badInput(fmt.Errorf("--format: want text or json, got %q", f.format))
	}
	since := now.Add(-window)
	res, err := sqlite.ReadShadow(cmd.Context(), f.db, sqlite.ShadowQuery{Since: since, Alias: f.alias})
	if err != nil {
		return badInput(fmt.Errorf("--db: %w", err))
	}
	rep := shadow.Build(res)
	out := cmd.OutOrStdout()
	if f.format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	alias := f.alias
	if alias == "" {
		alias = "every alias"
	}
	fmt.Fprintf(out, "Shadow report: %s, %s, since %s\n\n", f.db, alias, since.UTC().Format(time.RFC3339))
	rep.WriteText(out)
	return nil
}
