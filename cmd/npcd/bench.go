package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/npcd/npcd/bench"
	"github.com/npcd/npcd/store"
)

func benchCommand(stdout, stderr io.Writer) *cobra.Command {
	return bench.Command(stdout, stderr, benchHarness())
}

// benchHarness gives the measurements the daemon's own wiring on
// temporary databases.
func benchHarness() bench.Harness {
	return bench.Harness{
		Open: func(ctx context.Context, opt bench.Options) (*bench.World, func(), error) {
			cfg, drop, err := benchDB(ctx, opt.DB)
			if err != nil {
				return nil, nil, err
			}
			if opt.IndexCacheMB > 0 {
				cfg.IndexCacheMB = opt.IndexCacheMB
			}
			a, err := openApp(ctx, cfg, zerolog.Nop(), appOptions{remote: opt.Remote, tickConfig: opt.TickConfig})
			if err != nil {
				drop()
				return nil, nil, err
			}
			w := &bench.World{Engine: a.engine, Chars: a.chars, Journal: a.journal, Retriever: a.retriever,
				Sizes: func(ctx context.Context) (int64, int64, error) {
					n, err := store.Size(ctx, a.db)
					if err != nil || !store.IsSQLite(a.db) {
						return n, 0, err
					}
					return n, walSize(cfg.DB), nil
				},
				TaskCalls: a.metrics.TaskCalls}
			// The daemon's upkeep runs as in npcd serve: the write-ahead
			// log is checkpointed under the measured load too.
			walCtx, stopWAL := context.WithCancel(context.Background())
			walDone := make(chan struct{})
			go func() { defer close(walDone); a.keepWALSmall(walCtx, cfg.WALCheckpoint) }()
			return w, func() { stopWAL(); <-walDone; a.close(context.Background()); drop() }, nil
		},
		Serve: func(ctx context.Context, opt bench.ServeOptions) (string, func(), error) {
			cfg, drop, err := benchDB(ctx, "")
			if err != nil {
				return "", nil, err
			}
			cfg.Addr, cfg.LogLevel = "127.0.0.1:0", "error"
			cfg.BackgroundCompaction = !opt.Foreground
			cfg.MaxConcurrentCalls = max(cfg.MaxConcurrentCalls, opt.MaxCalls)
			if opt.IndexCacheMB > 0 {
				cfg.IndexCacheMB = opt.IndexCacheMB
			}
			sctx, stop := context.WithCancel(ctx)
			ready, done := make(chan string, 1), make(chan error, 1)
			go func() { done <- serve(sctx, cfg, io.Discard, ready) }()
			select {
			case addr := <-ready:
				return addr, func() { stop(); <-done; drop() }, nil
			case err := <-done:
				stop()
				drop()
				return "", nil, fmt.Errorf("serve: %w", err)
			}
		},
	}
}

// benchDB configures a fresh database for one measurement: a new SQLite
// file in a temporary directory or, with dsn, a new schema of that
// PostgreSQL database (bench.Schema); drop removes it.
func benchDB(ctx context.Context, dsn string) (Config, func(), error) {
	cfg := defaultConfig()
	if dsn != "" {
		u, drop, err := bench.Schema(ctx, dsn)
		if err != nil {
			return cfg, nil, fmt.Errorf("--db: %w", err)
		}
		cfg.DB, cfg.DBDriver = u, store.DriverPostgres
		return cfg, drop, nil
	}
	dir, err := os.MkdirTemp("", "npcd-bench-")
	if err != nil {
		return cfg, nil, err
	}
	cfg.DB = filepath.Join(dir, "bench.db")
	return cfg, func() { os.RemoveAll(dir) }, nil
}
