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
	// LogLevel is debug, info, warn or error (NPCD_LOG_LEVEL); default info.
	LogLevel string
}

// defaultConfig returns the embedded defaults.
func defaultConfig() Config {
	return Config{
		Addr: "127.0.0.1:8740", DB: "./npcd.db", DBDriver: store.DriverSQLite,
		LLMTimeout: 60 * time.Second, MaxConcurrentCalls: 8, TickTimeout: 2 * time.Minute,
		MaxBodyBytes: 1 << 20, SleepCron: "0 3 * * *", SleepTimezone: "UTC", ShutdownTimeout: 30 * time.Second,
		LogLevel: "info",
	}
}

// configFromEnv returns the defaults overridden by the environment.
// Environment variables are read here and nowhere else.
func configFromEnv(getenv func(string) string) (Config, error) {
	c := defaultConfig()
	str := func(dst *string, keys ...string) {
		for _, k := range keys {
			if v := getenv(k); v != "" {
				*dst = v
				return
			}
		}
	}
	var errs []error
	dur := func(dst *time.Duration, key string) {
		if v := getenv(key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a duration (like 30s or 2m)", key, v))
				return
			}
			*dst = d
		}
	}
	num := func(dst *int, key string) {
		if v := getenv(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not an integer", key, v))
				return
			}
			*dst = n
		}
	}
	str(&c.Addr, "NPCD_ADDR")
	str(&c.DB, "NPCD_DB")
	str(&c.DBDriver, "NPCD_DB_DRIVER")
	str(&c.LLMBaseURL, "NPCD_LLM_BASE_URL")
	str(&c.LLMAPIKey, "NPCD_LLM_API_KEY", "OPENAI_API_KEY")
	str(&c.Model, "NPCD_MODEL")
	str(&c.EmbeddingModel, "NPCD_EMBEDDING_MODEL")
	str(&c.APIToken, "NPCD_API_TOKEN")
	str(&c.SleepCron, "NPCD_SLEEP_CRON")
	str(&c.SleepTimezone, "NPCD_SLEEP_TZ")
	str(&c.LogLevel, "NPCD_LOG_LEVEL")
	dur(&c.LLMTimeout, "NPCD_LLM_TIMEOUT")
	dur(&c.TickTimeout, "NPCD_TICK_TIMEOUT")
	dur(&c.ShutdownTimeout, "NPCD_SHUTDOWN_TIMEOUT")
	num(&c.MaxConcurrentCalls, "NPCD_MAX_CONCURRENT_CALLS")
	if v := getenv("NPCD_INSECURE_NO_AUTH"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("NPCD_INSECURE_NO_AUTH: %q is not 1, 0, true or false", v))
		}
		c.InsecureNoAuth = b
	}
	if v := getenv("NPCD_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("NPCD_MAX_BODY_BYTES: %q is not an integer", v))
		}
		c.MaxBodyBytes = n
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
	case c.DBDriver != store.DriverSQLite && c.DBDriver != store.DriverPostgres:
		return fmt.Errorf("db-driver: %q is not sqlite or postgres", c.DBDriver)
	case c.Model != character.DefaultModel && c.LLMBaseURL == "":
		return fmt.Errorf("model: %q needs an endpoint (NPCD_LLM_BASE_URL); without one only builtin runs", c.Model)
	case c.LLMTimeout < time.Second:
		return errors.New("llm-timeout: must be at least 1s")
	case c.MaxConcurrentCalls < 1 || c.MaxConcurrentCalls > 1024:
		return errors.New("max-concurrent-calls: must be between 1 and 1024")
	case c.TickTimeout < time.Second:
		return errors.New("tick-timeout: must be at least 1s")
	case c.MaxBodyBytes < 1024:
		return errors.New("max-body-bytes: must be at least 1024")
	case c.ShutdownTimeout < 0:
		return errors.New("shutdown-timeout: must not be negative")
	}
	if _, err := zerolog.ParseLevel(c.LogLevel); err != nil || c.LogLevel == "" {
		return fmt.Errorf("log-level: %q is not debug, info, warn or error", c.LogLevel)
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

// logger builds the daemon's JSON logger.
func (c *Config) logger(w io.Writer) zerolog.Logger {
	lvl, _ := zerolog.ParseLevel(c.LogLevel)
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}
