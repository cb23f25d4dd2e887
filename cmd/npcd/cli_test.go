package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npcd/npcd/api"
	"github.com/npcd/npcd/internal/version"
)

// runCLI runs one npcd command line with the given environment and returns
// its stdout, stderr and error.
func runCLI(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut, func(k string) string { return env[k] })
	return out.String(), errOut.String(), err
}

func TestVersionFlag(t *testing.T) {
	t.Parallel()
	out, _, err := runCLI(t, nil, "--version")
	if err != nil {
		t.Fatal(err)
	}
	if want := "npcd " + version.String() + "\n"; out != want {
		t.Errorf("npcd --version = %q, want %q", out, want)
	}
}

// A command acting on an existing world refuses a --db that names no file,
// and creates nothing there.
func TestMissingDatabaseIsRefused(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"compact", "brom"},
		{"sleep", "brom"},
		{"aihistory", "brom"},
		{"aihistory", "brom", "compactions"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "mistyped.db")
			_, _, err := runCLI(t, nil, append(args, "--db", path)...)
			if err == nil || !strings.Contains(err.Error(), "no database at "+path) {
				t.Fatalf("err = %v, want no database at %s", err, path)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("the refused command created %v", ents)
			}
		})
	}
}

// serve creates the database it is told to use.
func TestServeCreatesItsDatabase(t *testing.T) {
	dir := t.TempDir()
	_, stop := startDaemon(t, dir)
	stop()
	if _, err := os.Stat(filepath.Join(dir, "npcd.db")); err != nil {
		t.Fatalf("serve did not create its database: %v", err)
	}
}

func TestErrorLinePrefixOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{errors.New("no database at x.db"), "npcd: no database at x.db"},
		{&api.APIError{Status: 404, Code: "not_found", Message: "no NPC brom"}, "npcd: HTTP 404 not_found: no NPC brom"},
	}
	for _, tt := range tests {
		if got := errorLine(tt.err); got != tt.want {
			t.Errorf("errorLine(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	// A real client failure, end to end: the daemon is not there.
	_, _, err := runCLI(t, map[string]string{"NPCD_ADDR": "127.0.0.1:1"}, "compact", "brom")
	if err == nil {
		t.Fatal("compact against no daemon succeeded")
	}
	if line := errorLine(err); strings.Count(line, "npcd:") != 1 {
		t.Errorf("error line %q repeats its prefix", line)
	}
}

func TestDaemonURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"":                    "http://127.0.0.1:8740",
		"127.0.0.1:9000":      "http://127.0.0.1:9000",
		":9000":               "http://127.0.0.1:9000",
		"0.0.0.0:9000":        "http://127.0.0.1:9000",
		"[::]:9000":           "http://127.0.0.1:9000",
		"npc.example:80":      "http://npc.example:80",
		"https://npc.example": "https://npc.example",
	} {
		if got := daemonURL(addr); got != want {
			t.Errorf("daemonURL(%q) = %q, want %q", addr, got, want)
		}
	}
}

// Every command that talks to a daemon reaches it at NPCD_ADDR, and every
// command's help names the environment variables beside the flags they set.
func TestCommandsShareTheAddressSetting(t *testing.T) {
	dir := t.TempDir()
	client, addr, stop := startDaemonAt(t, dir)
	defer stop()
	ctx := context.Background()
	if _, _, err := client.PutNPC(ctx, "brom", api.NPCSettings{Name: "Brom", Persona: "You are Brom."}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NPCD_ADDR": addr}
	for _, args := range [][]string{
		{"aihistory", "brom", "--json"},
		{"compact", "brom", "--json"},
		{"sleep", "brom", "--json"},
	} {
		if out, _, err := runCLI(t, env, args...); err != nil || out == "" {
			t.Errorf("%s with NPCD_ADDR: %q, %v", strings.Join(args, " "), out, err)
		}
	}
}

func TestHelpNamesEnvironmentVariables(t *testing.T) {
	t.Parallel()
	tests := map[string][]string{
		"serve":        envNames(),
		"aihistory":    {"NPCD_ADDR", "NPCD_API_TOKEN"},
		"compact":      {"NPCD_ADDR", "NPCD_API_TOKEN"},
		"sleep":        {"NPCD_ADDR", "NPCD_API_TOKEN"},
		"scenario run": {"NPCD_LLM_BASE_URL", "NPCD_LLM_API_KEY", "NPCD_MODEL"},
	}
	for cmd, vars := range tests {
		out, _, err := runCLI(t, nil, append(strings.Fields(cmd), "--help")...)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vars {
			if !strings.Contains(out, v) {
				t.Errorf("npcd %s --help does not name %s", cmd, v)
			}
		}
	}
	// The flags of serve name their variable on the flag's own line.
	out, _, _ := runCLI(t, nil, "serve", "--help")
	for _, ev := range envVars {
		if ev.flag == "" {
			continue
		}
		line := lineWith(out, "--"+ev.flag+" ")
		if !strings.Contains(line, ev.name) {
			t.Errorf("serve --help: the line of --%s (%q) does not name %s", ev.flag, line, ev.name)
		}
	}
}

func lineWith(text, sub string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NPCD_ADDR": "127.0.0.1:9", "OPENAI_API_KEY": "sk-openai", "NPCD_LLM_API_KEY": "sk-npcd",
		"NPCD_TICK_TIMEOUT": "3m", "NPCD_MAX_CONCURRENT_CALLS": "2", "NPCD_LOG_FORMAT": "console",
		"NPCD_MAX_BODY_BYTES": "2048"}
	c, err := configFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9" || c.LLMAPIKey != "sk-npcd" || c.TickTimeout.Minutes() != 3 || c.MaxConcurrentCalls != 2 || c.LogFormat != "console" ||
		c.MaxBodyBytes != 2048 {
		t.Errorf("config = %+v", c)
	}
	bad := map[string]string{"NPCD_TICK_TIMEOUT": "soon", "NPCD_MAX_BODY_BYTES": "big"}
	_, err = configFromEnv(func(k string) string { return bad[k] })
	if err == nil || !strings.Contains(err.Error(), "NPCD_TICK_TIMEOUT") || !strings.Contains(err.Error(), "NPCD_MAX_BODY_BYTES") {
		t.Errorf("bad environment: %v, want both variables named", err)
	}
	c = defaultConfig()
	c.LogFormat = "xml"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "log-format") {
		t.Errorf("log format xml: %v", err)
	}
}

func TestLogFormats(t *testing.T) {
	t.Parallel()
	for format, isJSON := range map[string]bool{"json": true, "console": false} {
		c := defaultConfig()
		c.LogFormat = format
		var buf bytes.Buffer
		log := c.logger(&buf)
		log.Info().Str("npc", "brom").Msg("tick")
		log.Debug().Msg("hidden at info")
		out := buf.String()
		if strings.HasPrefix(out, "{") != isJSON || !strings.Contains(out, "brom") || strings.Contains(out, "hidden") {
			t.Errorf("format %s wrote %q", format, out)
		}
	}
}

// Several daemons may share a PostgreSQL database: nothing to warn of,
// but a lease so short that a stall loses it.
func TestStartupWarnings(t *testing.T) {
	t.Parallel()
	c := defaultConfig()
	if w := startupWarnings(c); len(w) != 0 {
		t.Errorf("SQLite: warnings %q, want none", w)
	}
	c.DBDriver = "postgres"
	if w := startupWarnings(c); len(w) != 0 {
		t.Errorf("PostgreSQL: warnings %q, want none", w)
	}
	c.LeaseTTL = 2 * time.Second
	if w := startupWarnings(c); len(w) != 1 || !strings.Contains(w[0], "NPCD_LEASE_TTL") {
		t.Errorf("PostgreSQL with a 2s lease: warnings %q, want one about the lease", w)
	}
}

// envNames lists the variables of envVars.
func envNames() []string {
	var out []string
	for _, ev := range envVars {
		out = append(out, ev.name)
	}
	return out
}
