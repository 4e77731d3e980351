package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/keys"
	redisstore "github.com/keelmesh/keel/internal/store/redis"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

// keysFlags are the flags every keys subcommand takes.
type keysFlags struct {
	config string
	db     string
	json   bool
}

func keysCmd() *cobra.Command {
	var f keysFlags
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list, revoke and rotate virtual keys",
		Long: `Manage the virtual keys clients of a shared Keel send as their provider key
(x-api-key or Authorization: Bearer). A key's secret is shown once, when it
is created or rotated; the store keeps its SHA-256 hash and a short prefix.

The store is that of --config (keys.store: the SQLite file keys.path, or
the redis section's server), else the SQLite file --db (default
keel-keys.db). A
running keel serve sees a new key at once, and a revocation, rotation or
change within keys.refresh_interval (5s); the admin API (/admin/keys) does
the same with immediate effect. See docs/config.md, section keys.`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&f.config, "config", "", "Keel config file: use its keys.path")
	cmd.PersistentFlags().StringVar(&f.db, "db", config.DefaultKeysPath, "key store file (when --config is not given)")
	cmd.PersistentFlags().BoolVar(&f.json, "json", false, "print JSON")

	var spec keys.Spec
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a key and print its secret (shown this once)",
		Example: "  keel keys create --name ci --team search --owner ana@example.com --models sim-haiku,fast \\\n" +
			"      --rpm 600 --tpm 200000 --daily-usd 5 --monthly-usd 100",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := f.open()
			if err != nil {
				return err
			}
			defer st.Close()
			if err := spec.Limits.Validate(); err != nil {
				return badInput(err)
			}
			k, secret, err := keys.Create(cmd.Context(), st, spec, time.Now())
			if err != nil {
				return err
			}
			return printSecret(cmd.OutOrStdout(), f.json, "created", k, secret)
		},
	}
	create.Flags().StringVar(&spec.Name, "name", "", "a label")
	create.Flags().StringVar(&spec.Team, "team", "", "the team (spend is reported by team)")
	create.Flags().StringVar(&spec.Owner, "owner", "", "who owns the key")
	create.Flags().StringSliceVar(&spec.Models, "models", nil, "model or alias names the key may call (comma-separated; default all)")
	create.Flags().IntVar(&spec.RPM, "rpm", 0, "requests per minute (0: no limit)")
	create.Flags().IntVar(&spec.TPM, "tpm", 0, "tokens per minute, prompt and output (0: no limit)")
	create.Flags().Float64Var(&spec.DailyUSD, "daily-usd", 0, "budget per UTC day in US dollars (0: none)")
	create.Flags().Float64Var(&spec.MonthlyUSD, "monthly-usd", 0, "budget per calendar month (UTC) in US dollars (0: none)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the keys (never their secrets) with today's and this month's spend",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := f.open()
			if err != nil {
				return err
			}
			defer st.Close()
			return listKeys(cmd, st, f.json, time.Now())
		},
	}

	revoke := &cobra.Command{
		Use:   "revoke ID|PREFIX",
		Short: "Revoke a key: its secret stops working",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := f.open()
			if err != nil {
				return err
			}
			defer st.Close()
			k, err := keys.Revoke(cmd.Context(), st, args[0], time.Now())
			if err != nil {
				return badInput(err)
			}
			if f.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"key": k})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s (%s…) at %s\n", k.ID, k.Prefix, k.Revoked.Format(time.RFC3339))
			return nil
		},
	}

	rotate := &cobra.Command{
		Use:   "rotate ID|PREFIX",
		Short: "Give a key a new secret (shown this once); the old one stops working",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := f.open()
			if err != nil {
				return err
			}
			defer st.Close()
			k, secret, err := keys.Rotate(cmd.Context(), st, args[0])
			if err != nil {
				return badInput(err)
			}
			return printSecret(cmd.OutOrStdout(), f.json, "rotated", k, secret)
		},
	}
	cmd.AddCommand(create, list, revoke, rotate)
	return cmd
}

// keyStore is a key store the keys command opened, closed when done.
type keyStore interface {
	keys.Store
	Close() error
}

// open opens the key store of --config (keys.store: its keys.path, or
// the redis section's server), else the SQLite file --db.
func (f *keysFlags) open() (keyStore, error) {
	path := f.db
	if f.config != "" {
		cfg, err := config.Load(f.config)
		if err != nil {
			return nil, badInput(err)
		}
		if cfg.KeysStore() == config.KeysStoreRedis {
			rs, err := redisstore.New(cfg.Redis, nil)
			if err != nil {
				return nil, badInput(err)
			}
			return redisKeys{rs.Keys(), rs}, nil
		}
		if cfg.Keys.Path != "" {
			path = cfg.Keys.Path
		}
	}
	return sqlite.OpenKeys(path)
}

// redisKeys is the fleet's key store and the link it closes.
type redisKeys struct {
	*redisstore.KeyStore
	link *redisstore.Store
}

func (r redisKeys) Close() error { return r.link.Close() }

// printSecret prints a key made or rotated, with its secret.
func printSecret(w io.Writer, asJSON bool, what string, k keys.Key, secret string) error {
	if asJSON {
		return json.NewEncoder(w).Encode(keys.Created{Key: k, Secret: secret})
	}
	_, err := fmt.Fprintf(w, "%s %s (%s…)\n\n  %s\n\nThe secret is shown this once: Keel keeps only its SHA-256 hash. Clients send it as\ntheir API key (x-api-key or Authorization: Bearer).\n", what, k.ID, k.Prefix, secret)
	return err
}

func listKeys(cmd *cobra.Command, st keys.Store, asJSON bool, now time.Time) error {
	ctx := cmd.Context()
	all, err := st.Keys(ctx)
	if err != nil {
		return err
	}
	day, err := st.SpendIn(ctx, keys.DayWindow(now))
	if err != nil {
		return err
	}
	month, err := st.SpendIn(ctx, keys.MonthWindow(now))
	if err != nil {
		return err
	}
	views := make([]keys.View, 0, len(all))
	for _, k := range all {
		views = append(views, keys.View{Key: k, DayUSD: day[k.ID], MonthUSD: month[k.ID]})
	}
	if asJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"keys": views})
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tTEAM\tOWNER\tMODELS\tRPM\tTPM\tDAILY\tMONTHLY\tSPENT TODAY\tSPENT THIS MONTH\tSTATUS")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	limit := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("$%g", v)
	}
	count := func(v int) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprint(v)
	}
	for _, v := range views {
		status := "active"
		if !v.Revoked.IsZero() {
			status = "revoked " + v.Revoked.Format(time.DateOnly)
		}
		models := "all"
		if len(v.Models) > 0 {
			models = strings.Join(v.Models, ",")
		}
		fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t$%.4f\t$%.4f\t%s\n", v.ID, v.Prefix, dash(v.Name), dash(v.Team), dash(v.Owner), models,
			count(v.RPM), count(v.TPM), limit(v.DailyUSD), limit(v.MonthlyUSD), v.DayUSD, v.MonthUSD, status)
	}
	return tw.Flush()
}
