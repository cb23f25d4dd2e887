package main

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
)

// NPCD_DB holding a postgres:// URL picks the PostgreSQL driver by itself.
func TestPostgresURLPicksTheDriver(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u@127.0.0.1:5432/npcd":   store.DriverPostgres,
		"postgresql://u@127.0.0.1:5432/npcd": store.DriverPostgres,
		"./npcd.db":                          store.DriverSQLite,
	} {
		c := defaultConfig()
		c.DB = dsn
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if c.DBDriver != want {
			t.Errorf("%s: driver %s, want %s", dsn, c.DBDriver, want)
		}
	}
}

// Background compaction is on by default; NPCD_BACKGROUND_COMPACTION turns
// it off, and the engine the daemon wires follows it. A value that is no
// boolean is refused, naming the variable.
func TestBackgroundCompactionSetting(t *testing.T) {
	for v, want := range map[string]bool{"": true, "0": false, "false": false, "1": true} {
		cfg, err := configFromEnv(envWith("NPCD_BACKGROUND_COMPACTION", v))
		if err != nil {
			t.Fatalf("NPCD_BACKGROUND_COMPACTION=%q: %v", v, err)
		}
		if cfg.BackgroundCompaction != want {
			t.Errorf("NPCD_BACKGROUND_COMPACTION=%q: %v, want %v", v, cfg.BackgroundCompaction, want)
		}
		if got := engineConfig(t, cfg).BackgroundCompaction; got != want {
			t.Errorf("NPCD_BACKGROUND_COMPACTION=%q: the engine has it %v, want %v", v, got, want)
		}
	}
	_, err := configFromEnv(envWith("NPCD_BACKGROUND_COMPACTION", "sometimes"))
	if err == nil || !strings.Contains(err.Error(), "NPCD_BACKGROUND_COMPACTION") {
		t.Fatalf("NPCD_BACKGROUND_COMPACTION=sometimes: %v, want an error naming the variable", err)
	}
}

// The engine's caches follow their settings in MiB: the history cache
// holds 256 MiB by default (NPCD_HISTORY_CACHE_MB), the profile lines 16
// MiB (NPCD_PROFILE_CACHE_MB), and the engine the daemon wires follows
// each. A value out of range, or no integer, is refused, naming the
// variable.
func TestCacheSettings(t *testing.T) {
	for _, c := range []struct {
		name  string
		bytes func(tick.Config) int64
		set   map[string]int64
	}{
		{"NPCD_HISTORY_CACHE_MB", func(c tick.Config) int64 { return c.HistoryCacheBytes }, map[string]int64{"": 256 << 20, "32": 32 << 20, "1024": 1024 << 20}},
		{"NPCD_PROFILE_CACHE_MB", func(c tick.Config) int64 { return c.ProfileCacheBytes }, map[string]int64{"": 16 << 20, "1": 1 << 20, "64": 64 << 20}},
	} {
		for v, want := range c.set {
			cfg, err := configFromEnv(envWith(c.name, v))
			if err != nil {
				t.Fatalf("%s=%q: %v", c.name, v, err)
			}
			if got := c.bytes(engineConfig(t, cfg)); got != want {
				t.Errorf("%s=%q: the engine holds %d bytes, want %d", c.name, v, got, want)
			}
		}
		for _, v := range []string{"0", "-5", "many", "2000000"} {
			cfg, err := configFromEnv(envWith(c.name, v))
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), c.name) {
				t.Errorf("%s=%s: %v, want an error naming the variable", c.name, v, err)
			}
		}
	}
}

// Background compactions write their summaries half the cores at a time by
// default with the builtin model only, NPCD_MAX_CONCURRENT_CALLS at a time
// with an endpoint; NPCD_BACKGROUND_COMPACTIONS sets it, and the engine the
// daemon wires follows it. A value out of range, or no integer, is refused,
// naming the variable.
func TestBackgroundCompactionsSetting(t *testing.T) {
	for v, want := range map[string]int{"": max(1, runtime.GOMAXPROCS(0)/2), "3": 3} {
		cfg, err := configFromEnv(envWith("NPCD_BACKGROUND_COMPACTIONS", v))
		if err != nil {
			t.Fatalf("NPCD_BACKGROUND_COMPACTIONS=%q: %v", v, err)
		}
		if got := engineConfig(t, cfg).BackgroundCompactions; got != want {
			t.Errorf("NPCD_BACKGROUND_COMPACTIONS=%q: the engine runs %d at once, want %d", v, got, want)
		}
	}
	cfg := defaultConfig()
	cfg.LLMBaseURL, cfg.MaxConcurrentCalls = "http://127.0.0.1:9/v1", 5
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := engineConfig(t, cfg).BackgroundCompactions; got != 5 {
		t.Errorf("with an endpoint, the engine runs %d background compactions at once, want NPCD_MAX_CONCURRENT_CALLS (5)", got)
	}
	for _, v := range []string{"-1", "many", "2000"} {
		cfg, err := configFromEnv(envWith("NPCD_BACKGROUND_COMPACTIONS", v))
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "NPCD_BACKGROUND_COMPACTIONS") {
			t.Errorf("NPCD_BACKGROUND_COMPACTIONS=%s: %v, want an error naming the variable", v, err)
		}
	}
}

// engineConfig is the configuration of the engine the daemon wires from
// cfg, on a database of its own.
func engineConfig(t *testing.T, cfg Config) tick.Config {
	t.Helper()
	cfg.DB = filepath.Join(t.TempDir(), "npcd.db")
	a, err := openApp(context.Background(), cfg, zerolog.Nop(), appOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close(context.Background())
	return a.engine.Config()
}

// envWith is an environment that sets only k, to v.
func envWith(k, v string) func(string) string {
	return func(name string) string {
		if name == k {
			return v
		}
		return ""
	}
}
