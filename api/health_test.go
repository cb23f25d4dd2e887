package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
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

// One access line per request: method, route pattern (not the path),
// status, duration and NPC; scrapes only at debug level.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	e := newEnv(t, envOpts{log: &buf})
	e.put("brom", bromSettings())
	e.do("GET", "/v1/npcs/nobody", "")
	e.do("GET", "/metrics", "")
	e.do("GET", "/nowhere", "")
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		switch {
		case m["message"] != "request":
		case m["level"] == "info":
			lines = append(lines, m)
		case m["route"] != "/metrics":
			t.Errorf("only scrapes log below info: %v", m)
		}
	}
	want := []map[string]any{
		{"method": "PUT", "route": "/v1/npcs/{npc}", "status": float64(201), "npc": "brom"},
		{"method": "GET", "route": "/v1/npcs/{npc}", "status": float64(404), "npc": "nobody"},
		{"method": "GET", "route": "unmatched", "status": float64(404)},
	}
	if len(lines) != len(want) {
		t.Fatalf("access lines = %d, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, lines[i][k], v)
			}
		}
		if _, ok := lines[i]["duration_ms"].(float64); !ok {
			t.Errorf("line %d has no duration_ms", i)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
