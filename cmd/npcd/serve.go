package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/npcd/npcd/internal/version"
	"github.com/npcd/npcd/store"
)

// serveFlags binds the daemon's flags to cfg (flags override the environment).
func serveFlags(cmd *cobra.Command, cfg *Config) {
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address (NPCD_ADDR)")
	f.StringVar(&cfg.DB, "db", cfg.DB, "SQLite file or PostgreSQL DSN (NPCD_DB)")
	f.StringVar(&cfg.DBDriver, "db-driver", cfg.DBDriver, "sqlite or postgres (NPCD_DB_DRIVER)")
	f.StringVar(&cfg.LLMBaseURL, "llm-base-url", cfg.LLMBaseURL, "OpenAI-compatible endpoint; empty: offline builtin model (NPCD_LLM_BASE_URL)")
	f.StringVar(&cfg.Model, "model", cfg.Model, "model of NPCs that name none (NPCD_MODEL)")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error (NPCD_LOG_LEVEL)")
	f.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "json, or console for a terminal (NPCD_LOG_FORMAT)")
	f.BoolVar(&cfg.InsecureNoAuth, "insecure-no-auth", cfg.InsecureNoAuth, "serve without NPCD_API_TOKEN on a non-loopback address: the network is trusted (NPCD_INSECURE_NO_AUTH)")
}

func serveCommand(stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	var cfg Config
	var envErr error
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: the HTTP API, ticks and sleep schedules",
		Long:  "Run the daemon: the HTTP API, ticks and sleep schedules.\n\n" + envHelp(),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if envErr != nil {
				return envErr
			}
			return serve(cmd.Context(), cfg, stderr, nil)
		},
	}
	cfg, envErr = configFromEnv(getenv)
	serveFlags(cmd, &cfg)
	return cmd
}

// startupWarnings are what an operator should know about the configuration
// before relying on it.
func startupWarnings(cfg Config) []string {
	var out []string
	if cfg.DBDriver == store.DriverPostgres && cfg.LeaseTTL < 5*time.Second {
		// Several daemons may share a PostgreSQL database (NPCs are
		// leased); a short lease needs renewals that are never late.
		out = append(out, fmt.Sprintf("NPCD_LEASE_TTL is %s: a daemon that stalls longer loses its NPCs to the other daemons mid-work", cfg.LeaseTTL))
	}
	return out
}

// scheduleSync is how often serve reloads the sleep schedules from the
// database, for NPCs changed through another daemon.
const scheduleSync = 30 * time.Second

// serve runs the daemon until ctx ends, then shuts down gracefully: it stops
// accepting requests, lets in-flight ticks finish, and closes the database.
// When ready is not nil it receives the bound address once listening.
func serve(ctx context.Context, cfg Config, logOut io.Writer, ready chan<- string) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cfg.checkExposure(); err != nil {
		return err
	}
	log := cfg.logger(logOut)
	a, err := openApp(ctx, cfg, log, appOptions{})
	if err != nil {
		return err
	}
	if err := a.startSchedules(ctx); err != nil {
		a.close(context.Background())
		return fmt.Errorf("sleep schedules: %w", err)
	}
	if err := a.startUpkeep(); err != nil {
		a.close(context.Background())
		return fmt.Errorf("housekeeping schedule: %w", err)
	}
	// Input posted before a restart to NPCs with auto-tick is answered
	// without waiting for more.
	if n, err := a.engine.ResumeAutoTicks(ctx); err != nil {
		a.close(context.Background())
		return fmt.Errorf("auto-ticks: %w", err)
	} else if n > 0 {
		log.Info().Int("npcs", n).Msg("auto-tick resumed for npcs with pending input")
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		a.close(context.Background())
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{
		Handler:           a.server,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      cfg.TickTimeout + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	// Long polls of the action feed answer at once when shutdown begins.
	srv.RegisterOnShutdown(a.engine.StopFeed)
	log.Info().Str("addr", ln.Addr().String()).Str("db", cfg.DB).Str("model", cfg.Model).Str("version", version.String()).Msg("npcd listening")
	for _, w := range startupWarnings(cfg) {
		log.Warn().Msg(w)
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	walCtx, cancelWAL := context.WithCancel(context.Background())
	walDone := make(chan struct{})
	go func() {
		defer close(walDone)
		syncDone := make(chan struct{})
		go func() { defer close(syncDone); a.syncSchedules(walCtx, scheduleSync) }()
		a.keepWALSmall(walCtx, cfg.WALCheckpoint)
		<-syncDone
	}()
	warmDone := make(chan struct{})
	go func() { defer close(warmDone); a.warmIndexes(walCtx) }()
	stopWAL := func() { cancelWAL(); <-walDone; <-warmDone } // before the database closes
	select {
	case err := <-errc:
		stopWAL()
		a.close(context.Background())
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	if err := srv.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("shutdown: %w", err))
	}
	stopWAL()
	if err := a.close(sctx); err != nil {
		errs = append(errs, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	log.Info().Msg("stopped")
	return errors.Join(errs...)
}
