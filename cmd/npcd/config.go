package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/lease"
	"github.com/npcd/npcd/store"
)

// Config is the daemon's configuration. Each field is set from its
// environment variable, then from its flag; the comment gives both and the
// default.
type Config struct {
	// Addr is the HTTP listen address (NPCD_ADDR, --addr); default 127.0.0.1:8740.
	Addr string
	// DB is the SQLite file or PostgreSQL DSN (NPCD_DB, --db); default ./npcd.db.
	DB string
	// DBDriver is sqlite or postgres (NPCD_DB_DRIVER, --db-driver); default sqlite.
	DBDriver string
	// LLMBaseURL is an OpenAI-compatible endpoint (NPCD_LLM_BASE_URL,
	// --llm-base-url); empty means every NPC uses the offline builtin model.
	LLMBaseURL string
	// LLMAPIKey is the endpoint's key (NPCD_LLM_API_KEY, else OPENAI_API_KEY).
	LLMAPIKey string
	// Model is the model of NPCs that name none (NPCD_MODEL, --model);
	// default builtin, or gpt-4o-mini when an endpoint is set.
	Model string
	// EmbeddingModel names the endpoint's embedding model
	// (NPCD_EMBEDDING_MODEL); empty uses the offline embedder.
	EmbeddingModel string
	// APIToken, when set, is the bearer token every /v1 call needs (NPCD_API_TOKEN).
	APIToken string
	// InsecureNoAuth lets serve listen beyond loopback without an APIToken
	// (NPCD_INSECURE_NO_AUTH=1, --insecure-no-auth): only for a network
	// where every host may drive every NPC.
	InsecureNoAuth bool
	// LLMTimeout bounds one HTTP attempt to the endpoint (NPCD_LLM_TIMEOUT); default 60s.
	LLMTimeout time.Duration
	// MaxConcurrentCalls bounds model calls in flight (NPCD_MAX_CONCURRENT_CALLS); default 8.
	MaxConcurrentCalls int
	// TickTimeout bounds one tick (NPCD_TICK_TIMEOUT); default 2m.
	TickTimeout time.Duration
	// MaxBodyBytes bounds a request body (NPCD_MAX_BODY_BYTES); default 1 MiB.
	MaxBodyBytes int64
	// SleepCron is the world's default sleep schedule for NPCs without one
	// (NPCD_SLEEP_CRON); default "0 3 * * *".
	SleepCron string
	// SleepTimezone is the default time zone of sleep schedules (NPCD_SLEEP_TZ); default UTC.
	SleepTimezone string
	// ShutdownTimeout bounds a graceful shutdown (NPCD_SHUTDOWN_TIMEOUT); default 30s.
	ShutdownTimeout time.Duration
	// LogLevel is debug, info, warn or error (NPCD_LOG_LEVEL, --log-level); default info.
	LogLevel string
	// LogFormat is json (one object per line, for collectors) or console
	// (aligned and coloured, for a terminal) (NPCD_LOG_FORMAT, --log-format);
	// default json.
	LogFormat string
	// IndexCacheMB bounds the memory search's in-memory index cache, in
	// MiB (NPCD_INDEX_CACHE_MB); default 128.
	IndexCacheMB int
	// HistoryCacheMB bounds the live histories the tick keeps in memory
	// between an NPC's ticks, in MiB (NPCD_HISTORY_CACHE_MB); default 256.
	HistoryCacheMB int
	// ProfileCacheMB bounds the profile lines the tick keeps in memory,
	// shown again while the profiles they show have not changed, in MiB
	// (NPCD_PROFILE_CACHE_MB); default 16.
	ProfileCacheMB int
	// WALCheckpoint is how often the daemon checkpoints and truncates
	// SQLite's write-ahead log (NPCD_WAL_CHECKPOINT); default 1m.
	WALCheckpoint time.Duration
	// OutcomeRetention is how long the daemon keeps each tick's stored
	// answer (what idempotency keys, GET of a tick and the action feed
	// read) before pruning it (NPCD_OUTCOME_RETENTION); default 7 days,
	// 0 keeps them forever.
	OutcomeRetention time.Duration
	// LeaseTTL is how long an NPC's lease lasts unless renewed: how long
	// the NPCs of a daemon that died wait for another daemon sharing the
	// database (NPCD_LEASE_TTL); default 15s, renewed every third of it.
	LeaseTTL time.Duration
	// LeaseWait bounds how long a request waits for an NPC another daemon
	// holds before it answers 409 npc_busy (NPCD_LEASE_WAIT); default 2s.
	LeaseWait time.Duration
	// BackgroundCompaction compacts an NPC's context beside its ticks when
	// a tick leaves it close to the emergency threshold, instead of inside
	// the next tick (NPCD_BACKGROUND_COMPACTION); default true.
	BackgroundCompaction bool
	// BackgroundCompactions bounds the background compactions under way
	// at once, from their summary to their commit
	// (NPCD_BACKGROUND_COMPACTIONS); 0, the default, is half the cores (at
	// least 1) with the builtin model only, whose summaries take a core
	// each, and MaxConcurrentCalls with an endpoint, whose summaries wait
	// on the network.
	BackgroundCompactions int
}

// DefaultOutcomeRetention is how long tick answers are kept by default.
const DefaultOutcomeRetention = 7 * 24 * time.Hour

// defaultConfig returns the embedded defaults.
func defaultConfig() Config {
	return Config{
		Addr: "127.0.0.1:8740", DB: "./npcd.db", DBDriver: store.DriverSQLite,
		LLMTimeout: 60 * time.Second, MaxConcurrentCalls: 8, TickTimeout: 2 * time.Minute,
		MaxBodyBytes: 1 << 20, SleepCron: "0 3 * * *", SleepTimezone: "UTC", ShutdownTimeout: 30 * time.Second,
		LogLevel: "info", LogFormat: "json", IndexCacheMB: 128, HistoryCacheMB: 256, ProfileCacheMB: 16, WALCheckpoint: time.Minute, OutcomeRetention: DefaultOutcomeRetention,
		LeaseTTL: lease.DefaultTTL, LeaseWait: lease.DefaultWait, BackgroundCompaction: true,
	}
}

// envVar is one environment variable of the configuration: the serve flag
// that overrides it ("" for none), what it sets, and how.
type envVar struct {
	name string
	flag string
	help string
	set  func(c *Config, v string) error
}

// envVars are every environment variable npcd reads, in the order they
// apply (a later one wins: NPCD_LLM_API_KEY over OPENAI_API_KEY). serve's
// help lists them.
var envVars = []envVar{
	{"NPCD_ADDR", "addr", "listen address; the other commands reach the daemon there", setStr(func(c *Config) *string { return &c.Addr })},
	{"NPCD_DB", "db", "SQLite file or PostgreSQL DSN", setStr(func(c *Config) *string { return &c.DB })},
	{"NPCD_DB_DRIVER", "db-driver", "sqlite or postgres", setStr(func(c *Config) *string { return &c.DBDriver })},
	{"NPCD_LLM_BASE_URL", "llm-base-url", "OpenAI-compatible endpoint; empty: offline builtin model", setStr(func(c *Config) *string { return &c.LLMBaseURL })},
	{"OPENAI_API_KEY", "", "the endpoint's key, when NPCD_LLM_API_KEY is unset", setStr(func(c *Config) *string { return &c.LLMAPIKey })},
	{"NPCD_LLM_API_KEY", "", "the endpoint's key", setStr(func(c *Config) *string { return &c.LLMAPIKey })},
	{"NPCD_MODEL", "model", "model of NPCs that name none", setStr(func(c *Config) *string { return &c.Model })},
	{"NPCD_EMBEDDING_MODEL", "", "embedding model of the endpoint; empty: offline embedder", setStr(func(c *Config) *string { return &c.EmbeddingModel })},
	{"NPCD_API_TOKEN", "", "bearer token every /v1 call needs; the other commands send it", setStr(func(c *Config) *string { return &c.APIToken })},
	{"NPCD_SLEEP_CRON", "", "world default sleep schedule", setStr(func(c *Config) *string { return &c.SleepCron })},
	{"NPCD_SLEEP_TZ", "", "time zone of sleep schedules", setStr(func(c *Config) *string { return &c.SleepTimezone })},
	{"NPCD_LOG_LEVEL", "log-level", "debug, info, warn or error", setStr(func(c *Config) *string { return &c.LogLevel })},
	{"NPCD_LOG_FORMAT", "log-format", "json or console", setStr(func(c *Config) *string { return &c.LogFormat })},
	{"NPCD_LLM_TIMEOUT", "", "one HTTP attempt to the endpoint", setDur(func(c *Config) *time.Duration { return &c.LLMTimeout })},
	{"NPCD_TICK_TIMEOUT", "", "one tick, model calls included", setDur(func(c *Config) *time.Duration { return &c.TickTimeout })},
	{"NPCD_SHUTDOWN_TIMEOUT", "", "a graceful shutdown", setDur(func(c *Config) *time.Duration { return &c.ShutdownTimeout })},
	{"NPCD_MAX_CONCURRENT_CALLS", "", "model calls in flight across all NPCs", setInt(func(c *Config) *int { return &c.MaxConcurrentCalls })},
	{"NPCD_MAX_BODY_BYTES", "", "request body limit (413 above)", setParsed(func(c *Config) *int64 { return &c.MaxBodyBytes },
		func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }, "an integer")},
	{"NPCD_INDEX_CACHE_MB", "", "memory the search index cache may hold, in MiB", setInt(func(c *Config) *int { return &c.IndexCacheMB })},
	{"NPCD_HISTORY_CACHE_MB", "", "memory the live histories kept between an NPC's ticks may hold, in MiB", setInt(func(c *Config) *int { return &c.HistoryCacheMB })},
	{"NPCD_PROFILE_CACHE_MB", "", "memory the profile lines a tick shows of those present may hold between ticks, in MiB", setInt(func(c *Config) *int { return &c.ProfileCacheMB })},
	{"NPCD_BACKGROUND_COMPACTION", "", "0: a compaction a tick needs runs inside it; 1 (default): it runs beside the ticks once one leaves the context close to the emergency threshold",
		setBool(func(c *Config) *bool { return &c.BackgroundCompaction })},
	{"NPCD_BACKGROUND_COMPACTIONS", "", "background compactions under way at once (default: half the cores with the builtin model only, NPCD_MAX_CONCURRENT_CALLS with an endpoint)",
		setInt(func(c *Config) *int { return &c.BackgroundCompactions })},
	{"NPCD_INSECURE_NO_AUTH", "insecure-no-auth", "1: serve without NPCD_API_TOKEN on a non-loopback address (the network is trusted)",
		setBool(func(c *Config) *bool { return &c.InsecureNoAuth })},
	{"NPCD_WAL_CHECKPOINT", "", "how often SQLite's write-ahead log is checkpointed and truncated", setDur(func(c *Config) *time.Duration { return &c.WALCheckpoint })},
	{"NPCD_OUTCOME_RETENTION", "", "how long tick answers are kept for idempotency-key retries, GET of a tick and the action feed (0: forever)", setDur(func(c *Config) *time.Duration { return &c.OutcomeRetention })},
	{"NPCD_LEASE_TTL", "", "how long an NPC's lease outlives a daemon that died (daemons sharing a database)", setDur(func(c *Config) *time.Duration { return &c.LeaseTTL })},
	{"NPCD_LEASE_WAIT", "", "how long a request waits for an NPC another daemon holds before 409 npc_busy", setDur(func(c *Config) *time.Duration { return &c.LeaseWait })},
}

func setStr(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = v; return nil }
}

func setInt(field func(*Config) *int) func(*Config, string) error {
	return setParsed(field, strconv.Atoi, "an integer")
}

func setBool(field func(*Config) *bool) func(*Config, string) error {
	return setParsed(field, strconv.ParseBool, "1, 0, true or false")
}

func setDur(field func(*Config) *time.Duration) func(*Config, string) error {
	return setParsed(field, time.ParseDuration, "a duration (like 30s or 2m)")
}

// setParsed sets field to the value parse reads, or says the value is not
// what: what the variable takes.
func setParsed[T any](field func(*Config) *T, parse func(string) (T, error), what string) func(*Config, string) error {
	return func(c *Config, v string) error {
		x, err := parse(v)
		if err != nil {
			return fmt.Errorf("%q is not %s", v, what)
		}
		*field(c) = x
		return nil
	}
}

// envHelp is the environment section of serve's help.
func envHelp() string {
	var b strings.Builder
	b.WriteString("Environment (a flag overrides its variable):\n")
	for _, ev := range envVars {
		flag := ""
		if ev.flag != "" {
			flag = "--" + ev.flag
		}
		fmt.Fprintf(&b, "  %-26s %-15s %s\n", ev.name, flag, ev.help)
	}
	return b.String()
}

// configFromEnv returns the defaults overridden by the environment.
// Environment variables are read here and nowhere else.
func configFromEnv(getenv func(string) string) (Config, error) {
	c := defaultConfig()
	var errs []error
	for _, ev := range envVars {
		if v := getenv(ev.name); v != "" {
			if err := ev.set(&c, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", ev.name, err))
			}
		}
	}
	return c, errors.Join(errs...)
}

// Validate checks the configuration; the daemon refuses to start on error.
func (c *Config) Validate() error {
	if c.Model == "" {
		c.Model = character.DefaultModel
		if c.LLMBaseURL != "" {
			c.Model = "gpt-4o-mini"
		}
	}
	switch {
	case c.Addr == "":
		return errors.New("addr: must not be empty")
	case c.DB == "":
		return errors.New("db: must not be empty")
	}
	if c.DBDriver == store.DriverSQLite && isPostgresDSN(c.DB) {
		c.DBDriver = store.DriverPostgres // a postgres:// URL says which driver
	}
	switch {
	case c.DBDriver != store.DriverSQLite && c.DBDriver != store.DriverPostgres:
		return fmt.Errorf("db-driver: %q is not sqlite or postgres", c.DBDriver)
	case c.Model != character.DefaultModel && c.LLMBaseURL == "":
		return fmt.Errorf("model: %q needs an endpoint (NPCD_LLM_BASE_URL); without one only builtin runs", c.Model)
	case c.LLMTimeout < time.Second:
		return errors.New("llm-timeout: must be at least 1s")
	case c.MaxConcurrentCalls < 1 || c.MaxConcurrentCalls > 1024:
		return errors.New("max-concurrent-calls: must be between 1 and 1024")
	case c.BackgroundCompactions < 0 || c.BackgroundCompactions > 1024:
		return errors.New("background-compactions (NPCD_BACKGROUND_COMPACTIONS): must be between 1 and 1024, or 0 for the default")
	case c.TickTimeout < time.Second:
		return errors.New("tick-timeout: must be at least 1s")
	case c.MaxBodyBytes < 1024:
		return errors.New("max-body-bytes: must be at least 1024")
	case c.ShutdownTimeout < 0:
		return errors.New("shutdown-timeout: must not be negative")
	case c.IndexCacheMB < 1 || c.IndexCacheMB > 1<<20:
		return errors.New("index-cache-mb (NPCD_INDEX_CACHE_MB): must be between 1 and 1048576")
	case c.HistoryCacheMB < 1 || c.HistoryCacheMB > 1<<20:
		return errors.New("history-cache-mb (NPCD_HISTORY_CACHE_MB): must be between 1 and 1048576")
	case c.ProfileCacheMB < 1 || c.ProfileCacheMB > 1<<20:
		return errors.New("profile-cache-mb (NPCD_PROFILE_CACHE_MB): must be between 1 and 1048576")
	case c.WALCheckpoint < time.Second:
		return errors.New("wal-checkpoint (NPCD_WAL_CHECKPOINT): must be at least 1s")
	case c.OutcomeRetention != 0 && c.OutcomeRetention < time.Hour:
		return errors.New("outcome-retention (NPCD_OUTCOME_RETENTION): must be 0 (keep forever) or at least 1h")
	case c.LeaseTTL < time.Second || c.LeaseTTL > time.Hour:
		return errors.New("lease-ttl (NPCD_LEASE_TTL): must be between 1s and 1h")
	case c.LeaseWait < 0 || c.LeaseWait > time.Minute:
		return errors.New("lease-wait (NPCD_LEASE_WAIT): must be between 0s and 1m")
	}
	if _, err := zerolog.ParseLevel(c.LogLevel); err != nil || c.LogLevel == "" {
		return fmt.Errorf("log-level: %q is not debug, info, warn or error", c.LogLevel)
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		return fmt.Errorf("log-format: %q is not json or console", c.LogFormat)
	}
	if _, err := time.LoadLocation(c.SleepTimezone); err != nil {
		return fmt.Errorf("sleep-timezone: unknown time zone %q", c.SleepTimezone)
	}
	return nil
}

// checkExposure refuses to serve an API without a token on an address other
// hosts can reach, unless the network is declared trusted: anyone reaching
// it could read and rewrite every NPC's memory.
func (c *Config) checkExposure() error {
	if c.APIToken != "" || c.InsecureNoAuth || loopbackAddr(c.Addr) {
		return nil
	}
	return fmt.Errorf("addr: %s is reachable from other hosts and NPCD_API_TOKEN is not set; "+
		"set a token, listen on loopback (127.0.0.1), or pass --insecure-no-auth (NPCD_INSECURE_NO_AUTH=1) if every host on this network is trusted", c.Addr)
}

// loopbackAddr reports whether a listen address accepts only local
// connections: a loopback IP or "localhost". An empty host listens on every
// interface; other host names may resolve anywhere, so they do not count.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// logger builds the daemon's logger in the configured format.
func (c *Config) logger(w io.Writer) zerolog.Logger {
	lvl, _ := zerolog.ParseLevel(c.LogLevel)
	if c.LogFormat == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

// isPostgresDSN reports whether dsn is a PostgreSQL URL.
func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}
