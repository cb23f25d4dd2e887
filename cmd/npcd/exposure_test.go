package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve refuses an address other hosts can reach when no API token is set,
// unless the network is declared trusted; it opens nothing before refusing.
func TestServeRefusesAnOpenAddressWithoutToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.168.1.20:0", "npcd.example:0"} {
		cfg := defaultConfig()
		cfg.Addr = addr
		cfg.DB = filepath.Join(t.TempDir(), "npcd.db")
		// Bounded, so a daemon that starts anyway fails the test rather than hang it.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := serve(ctx, cfg, io.Discard, nil)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "NPCD_API_TOKEN") || !strings.Contains(err.Error(), "--insecure-no-auth") {
			t.Errorf("serve on %s without a token = %v, want a refusal naming the token and the flag", addr, err)
		}
	}
	for _, tc := range []struct {
		addr, token string
		insecure    bool
	}{
		{"127.0.0.1:8740", "", false},
		{"localhost:8740", "", false},
		{"[::1]:8740", "", false},
		{"0.0.0.0:8740", "s3cret", false},
		{"0.0.0.0:8740", "", true},
	} {
		cfg := defaultConfig()
		cfg.Addr, cfg.APIToken, cfg.InsecureNoAuth = tc.addr, tc.token, tc.insecure
		if err := cfg.checkExposure(); err != nil {
			t.Errorf("%+v refused: %v", tc, err)
		}
	}
}

func TestInsecureNoAuthFromEnvAndFlag(t *testing.T) {
	env := map[string]string{"NPCD_INSECURE_NO_AUTH": "1"}
	cfg, err := configFromEnv(func(k string) string { return env[k] })
	if err != nil || !cfg.InsecureNoAuth {
		t.Errorf("NPCD_INSECURE_NO_AUTH=1: %+v, %v", cfg.InsecureNoAuth, err)
	}
	env["NPCD_INSECURE_NO_AUTH"] = "maybe"
	if _, err := configFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "NPCD_INSECURE_NO_AUTH") {
		t.Errorf("NPCD_INSECURE_NO_AUTH=maybe accepted: %v", err)
	}
	cmd := serveCommand(io.Discard, io.Discard, func(string) string { return "" })
	if err := cmd.ParseFlags([]string{"--insecure-no-auth"}); err != nil {
		t.Fatal(err)
	}
	if f := cmd.Flags().Lookup("insecure-no-auth"); f == nil || f.Value.String() != "true" {
		t.Errorf("--insecure-no-auth not bound: %v", f)
	}
}
