package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/npcd/npcd/api"
	"github.com/npcd/npcd/store"
)

// target says where an admin command acts: a running daemon (the default)
// or a database file directly.
type target struct {
	server string
	db     string
	token  string
}

func (t *target) flags(cmd *cobra.Command, getenv func(string) string) {
	cmd.Flags().StringVar(&t.server, "server", daemonURL(getenv("NPCD_ADDR")),
		"URL of a running daemon (NPCD_ADDR, the address npcd serve listens on; token from NPCD_API_TOKEN)")
	cmd.Flags().StringVar(&t.db, "db", "", "act on this existing SQLite file directly instead of a daemon")
	t.token = getenv("NPCD_API_TOKEN")
}

// daemonURL is the URL a client reaches a daemon listening on addr at: the
// same NPCD_ADDR serves both sides, and a wildcard listen address is
// reached on the loopback.
func daemonURL(addr string) string {
	if addr == "" {
		addr = defaultConfig().Addr
	}
	if strings.Contains(addr, "://") {
		return addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// existingDB refuses an SQLite path with no file behind it: opening it
// would create an empty database, and a mistyped --db would then report
// that the NPC does not exist instead of naming the typo.
func existingDB(dsn string) error {
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no database at %s (--db names an existing file; npcd serve --db %s creates one)", path, path)
		}
		return fmt.Errorf("--db %s: %w", path, err)
	}
	return nil
}

func (t *target) client() *api.Client {
	return api.NewClient(t.server, t.token, &http.Client{Timeout: 10 * time.Minute})
}

// local opens the database named by --db in-process.
func (t *target) local(ctx context.Context, getenv func(string) string) (*app, error) {
	cfg, err := configFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	cfg.DB = t.db
	// One command, then the database is closed: a compaction started
	// beside it would only be cancelled.
	cfg.BackgroundCompaction = false
	if cfg.DBDriver == store.DriverSQLite {
		if err := existingDB(cfg.DB); err != nil {
			return nil, err
		}
	}
	return openApp(ctx, cfg, zerolog.Nop(), appOptions{})
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
