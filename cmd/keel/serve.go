package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/store/sqlite"
	"github.com/keelmesh/keel/sim"
)

func serveCmd() *cobra.Command {
	var cfgPath, listen, pprofAddr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the proxy: the Anthropic Messages and OpenAI Chat Completions APIs in front of the fleet",
		Long: `Run Keel as a proxy.

With --config, serve the providers and models the file declares.
Without it: if ANTHROPIC_API_KEY or OPENAI_API_KEY is set, proxy any model
name to the real provider of the client's wire format; otherwise start an
in-process simulated fleet on loopback and serve it, so curl works at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			// The first signal drains; a second one ends the process at
			// once (Go's default action for it).
			context.AfterFunc(ctx, stop)
			if pprofAddr != "" {
				stop, err := servePprof(pprofAddr)
				if err != nil {
					return err
				}
				defer stop()
			}
			return runServe(ctx, cfgPath, listen, cmd.Flags().Changed("listen"), os.Stderr, nil)
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "YAML config file (docs/config.md); none: the simulator, or the real providers when their API keys are set")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7878", "address to listen on (overrides server.listen)")
	cmd.Flags().StringVar(&pprofAddr, "pprof", "", "serve Go's pprof profiles at http://ADDR/debug/pprof/ (off by default; use a loopback address)")
	return cmd
}

// cutWait is how long the calls cut at the end of the shutdown timeout
// have to write their error events before every connection closes.
const cutWait = 500 * time.Millisecond

// runServe serves until ctx ends, then drains: /readyz answers 503 at once
// while serving goes on for server.drain_delay; then the listener closes and
// calls in flight get server.shutdown_timeout to finish; those still running
// then end with their wire's shutdown error (keel.ErrShuttingDown) and
// runServe returns an error saying how many were cut. It returns within
// drain_delay + shutdown_timeout + 1s of ctx's end, whatever closing the
// mesh or the simulator waits for. When ready is not nil it receives the
// listening address once serving.
func runServe(ctx context.Context, cfgPath, listen string, listenSet bool, logOut io.Writer, ready chan<- string) error {
	var cfg *config.Config
	var banner string
	// closers run last to first when runServe returns; after a drain, within
	// its deadline (then tornDown is set).
	var closers []func()
	tornDown := false
	defer func() {
		if !tornDown {
			runClosers(closers)
		}
	}()
	switch {
	case cfgPath != "":
		c, err := config.Load(cfgPath)
		if err == nil {
			err = c.CheckServes()
		}
		if err != nil {
			return err
		}
		cfg = c
		banner = "keel: serving the fleet configured in " + cfgPath
	case os.Getenv("ANTHROPIC_API_KEY") != "" || os.Getenv("OPENAI_API_KEY") != "":
		cfg = realProvidersConfig()
		banner = "keel: no --config; proxying to the real providers whose API keys are set (any model name passes through)"
	default:
		fleet, err := sim.New(sim.DefaultConfig())
		if err != nil {
			return err
		}
		srv, err := fleet.Start("127.0.0.1:0")
		if err != nil {
			return err
		}
		closers = append(closers, func() { srv.Close() })
		cfg = simfleet.Config(fleet, srv.URL())
		simfleet.AddEmbeddings(cfg, fleet, srv.URL())
		on := true
		cfg.RequestLog.Enabled = &on // keel report works after trying the simulator
		banner = "keel: no --config; serving an in-process SIMULATED fleet at " + srv.URL() + " (keel sim; not real models)"
	}
	serveDefaults(cfg)
	if listenSet || cfg.Server.Listen == "" {
		cfg.Server.Listen = listen
	}
	lines := newLineBuffer(logOut, 50*time.Millisecond, 64<<10)
	defer lines.Close()
	log := newLogger(lines, cfg.Server.LogFormat, cfg.Server.LogLevel)
	log.Info(banner)
	first, err := keel.New(cfg, keel.WithLogger(log))
	if err != nil {
		return err
	}
	if err := first.CheckCredentials(ctx); err != nil {
		first.Close()
		return fmt.Errorf("checking credentials: %w", err)
	}
	var cur atomic.Pointer[keel.Mesh]
	cur.Store(first)
	closers = append(closers, func() { cur.Load().Close() })
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return err
	}
	// SIGHUP reloads the config file: a new mesh serves the next request;
	// the old one finishes what it has in flight, then closes.
	hup := make(chan os.Signal, 1)
	if cfgPath != "" {
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	var reloads sync.WaitGroup
	closers = append(closers, reloads.Wait)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			nc, err := config.Load(cfgPath)
			if err == nil {
				err = nc.CheckServes()
			}
			if err == nil {
				serveDefaults(nc)
				nc.Server.Listen = cfg.Server.Listen
				var nm *keel.Mesh
				if nm, err = keel.New(nc, keel.WithLogger(log)); err == nil {
					old := cur.Swap(nm)
					if ctx.Err() != nil {
						nm.SetReady(false) // swapped in as the drain began
					}
					log.Info("keel: config reloaded", "file", cfgPath)
					grace := time.Duration(cfg.Server.ShutdownTimeout)
					reloads.Add(1)
					go func() {
						defer reloads.Done()
						t := time.NewTimer(grace)
						defer t.Stop()
						select {
						case <-t.C:
						case <-ctx.Done():
						}
						old.Close()
					}()
					continue
				}
			}
			log.Error("keel: config reload failed; still serving the previous config", "err", err)
		}
	}()
	// Every request's context descends from base: cancelling it with
	// keel.ErrShuttingDown ends what still runs at the end of the shutdown
	// timeout, each call with its wire's shutdown error.
	base, cut := context.WithCancelCause(context.Background())
	defer cut(nil)
	// Other requests (GET /dashboard/events among them, which lasts until
	// its client leaves) end when the listener closes: they would hold the
	// shutdown for its whole timeout.
	closing, closed := context.WithCancelCause(base)
	defer closed(nil)
	var calls atomic.Int64 // API calls (POSTs) in flight
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				calls.Add(1)
				defer calls.Add(-1)
			} else {
				ctx, cancel := context.WithCancelCause(r.Context())
				defer cancel(nil)
				stop := context.AfterFunc(closing, func() { cancel(context.Cause(closing)) })
				defer stop()
				r = r.WithContext(ctx)
			}
			cur.Load().Handler().ServeHTTP(w, r)
		}),
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	hs.RegisterOnShutdown(func() { closed(keel.ErrShuttingDown) })
	log.Info("keel: listening", "addr", "http://"+ln.Addr().String())
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Drain: report not ready at once and keep serving for the drain delay,
	// so that load balancers stop sending before the listener closes.
	drain := cfg.Server.DrainDelayOrDefault()
	grace := time.Duration(cfg.Server.ShutdownTimeout)
	if grace <= 0 {
		grace = time.Duration(config.DefaultShutdownTimeout)
	}
	deadline := time.Now().Add(drain + grace + time.Second)
	cur.Load().SetReady(false)
	log.Info("keel: draining: /readyz answers 503, still serving (a second signal quits at once)", "drain_delay", drain.String(), "shutdown_timeout", grace.String())
	if drain > 0 {
		t := time.NewTimer(drain)
		select {
		case <-t.C:
		case err := <-errc:
			t.Stop()
			return err
		}
	}
	// Close the listener and let calls in flight finish within the
	// shutdown timeout; then end those still running with their wire's
	// error, give them a moment to write it, and close every connection.
	log.Info("keel: shutting down: listener closed, waiting for calls in flight", "shutdown_timeout", grace.String())
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	var cutErr error
	switch err := hs.Shutdown(sctx); {
	case err == nil:
	case !errors.Is(err, context.DeadlineExceeded):
		hs.Close()
		return err
	default:
		n := calls.Load()
		cut(keel.ErrShuttingDown)
		wctx, wcancel := context.WithTimeout(context.Background(), cutWait)
		hs.Shutdown(wctx)
		wcancel()
		hs.Close()
		if n > 0 {
			log.Warn("keel: shutdown timeout expired; the calls still running were ended with their wire's shutdown error", "cut", n)
			cutErr = fmt.Errorf("shutdown: %d calls still running at the end of the %s shutdown timeout were cut", n, grace)
		} else {
			log.Warn("keel: shutdown timeout expired; remaining connections closed")
		}
	}
	// Close the mesh (its request log) and the simulator by the deadline,
	// whatever they wait for.
	tornDown = true
	if !within(time.Until(deadline), func() { runClosers(closers) }) {
		log.Warn("keel: closing did not finish by the shutdown deadline; exiting without waiting for it")
	}
	return cutErr
}

// runClosers runs cs last to first.
func runClosers(cs []func()) {
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// within runs f and waits at most d for it to return; it reports whether
// f returned. An f that has not goes on running.
func within(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// serveDefaults applies the defaults of `keel serve` that differ from the
// library's: the request log is on (so `keel report` works) unless the file
// says request_log.enabled: false, and with pii.enabled the audit log is
// written to keel-audit.db unless pii.audit.path names another file. keel.New
// alone writes them only when asked.
func serveDefaults(cfg *config.Config) {
	if cfg.RequestLog.Enabled == nil {
		on := true
		cfg.RequestLog.Enabled = &on
	}
	if cfg.PII.Enabled && cfg.PII.Audit.Path == "" {
		cfg.PII.Audit.Path = sqlite.DefaultAuditPath
	}
}

// realProvidersConfig proxies to the real APIs whose keys are in the environment.
func realProvidersConfig() *config.Config {
	cfg := &config.Config{}
	if os.Getenv("ANTHROPIC_API_KEY") != "" {
		cfg.Providers = append(cfg.Providers, config.Provider{Name: "anthropic", Type: "anthropic", APIKeyEnv: "ANTHROPIC_API_KEY"})
	}
	if os.Getenv("OPENAI_API_KEY") != "" {
		cfg.Providers = append(cfg.Providers, config.Provider{Name: "openai", Type: "openai", APIKeyEnv: "OPENAI_API_KEY"})
	}
	cfg.ApplyDefaults()
	return cfg
}

func newLogger(out io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil || level == "" {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(out, opts))
	}
	return slog.New(slog.NewTextHandler(out, opts))
}
