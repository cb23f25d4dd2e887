package api

import (
	"encoding/json"
	"testing"

	"github.com/npcd/npcd/internal/version"
)

func TestHealthzVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.do("GET", "/healthz", "")
	if r.status != 200 {
		t.Fatalf("GET /healthz = %d", r.status)
	}
	var h Health
	if err := json.Unmarshal(r.body, &h); err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || h.Version != version.String() || h.Version == "" {
		t.Errorf("healthz = %+v, want status ok and version %q", h, version.String())
	}
}
