package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/keelmesh/keel/sim"
)

func simCmd() *cobra.Command {
	var cfgPath, listen, pprofAddr string
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the simulated provider fleet (both wire formats, regions, latency, faults) on loopback",
		Long: `Run the simulated provider fleet.

Region R is served at /r/R/v1/messages (Anthropic), /r/R/v1/chat/completions
(OpenAI Chat Completions) and /r/R/v1/responses (the OpenAI Responses API, with
OpenAI's strict parameter checks and its store and previous_response_id);
/v1/... serves from a model's first region. POST /v1/embeddings is
OpenAI's Embeddings API (text-embedding-3-small, -3-large, ada-002) over
deterministic vectors, for cache.embeddings. Control it at runtime:
  POST /sim/regions/{name}/down | /sim/regions/{name}/up
  POST /sim/faults   (JSON list of faults; replaces the current ones)
  GET  /sim/faults, GET /sim/stats, POST /sim/reset

--pprof ADDR serves Go's CPU and heap profiles on a separate address, as
keel serve --pprof does. Unless GOGC is set, the garbage collector runs at
GOGC=400, so that the simulator takes less of the CPU it shares with the
gateway it serves.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lightGC()
			cfg := sim.DefaultConfig()
			if cfgPath != "" {
				data, err := os.ReadFile(cfgPath)
				if err != nil {
					return err
				}
				if cfg, err = sim.ParseConfig(data); err != nil {
					return err
				}
			}
			if pprofAddr != "" {
				stop, err := servePprof(pprofAddr)
				if err != nil {
					return err
				}
				defer stop()
			}
			fleet, err := sim.New(cfg)
			if err != nil {
				return err
			}
			srv, err := fleet.Start(listen)
			if err != nil {
				return err
			}
			defer srv.Close()
			fmt.Fprintf(cmd.ErrOrStderr(), "keel sim: simulated fleet listening on %s\n", srv.URL())
			for _, m := range fleet.Models() {
				fmt.Fprintf(cmd.ErrOrStderr(), "  model %-12s capability %d  regions %v\n", m.Name, m.Capability, m.Regions)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			<-ctx.Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "simulator YAML config (default: the built-in fleet of three models in three regions)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7879", "address to listen on")
	cmd.Flags().StringVar(&pprofAddr, "pprof", "", "serve Go's pprof profiles at http://ADDR/debug/pprof/ (off by default; use a loopback address)")
	return cmd
}

// lightGC sets GOGC=400 unless the environment sets GOGC. keel sim and keel
// bench share the machine with the gateway they measure, and their live heap
// is a few MB: at the default GOGC=100 they collect every few hundred calls,
// which cost each of them ~12 µs of CPU per call at 50 concurrent clients on
// 2 cores (measured), for a heap that stays near 10 MB at 400.
func lightGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
