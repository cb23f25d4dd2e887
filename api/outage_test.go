package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/npcd/npcd/llm"
)

// Provider outages reach a client as 503 model_unavailable with
// Retry-After, through the real OpenAI client and its retries; only an
// answer that cannot be used is 502. Nothing is consumed either way.
func TestProviderOutagesAre503(t *testing.T) {
	t.Parallel()
	// Port 1 on loopback refuses: only root may listen there and nothing
	// does. A port taken from a closed listener could be handed by then
	// to a test server running in parallel, which answers.
	refused := func() string { return "http://127.0.0.1:1/v1" }
	serve := func(h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL + "/v1"
	}
	tests := []struct {
		name   string
		url    func() string
		status int
		code   string
	}{
		{"500 after retries", func() string {
			return serve(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(500)
				io.WriteString(w, `{"error":{"message":"The server had an error","type":"server_error"}}`)
			})
		}, 503, CodeModelUnavailable},
		{"html 502 from a proxy", func() string {
			return serve(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(502)
				io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
			})
		}, 503, CodeModelUnavailable},
		{"connection refused", refused, 503, CodeModelUnavailable},
		{"cut-off body", func() string {
			return serve(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hel`)
			})
		}, 503, CodeModelUnavailable},
		{"hang-up", func() string {
			return serve(func(w http.ResponseWriter, r *http.Request) {
				if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
					conn.Close()
				}
			})
		}, 503, CodeModelUnavailable},
		{"unusable answer", func() string {
			return serve(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[]}`)
			})
		}, 502, CodeModelError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client, err := llm.NewClient(llm.ClientConfig{BaseURL: tt.url(), Model: "gpt-4o-mini", MaxRetries: 1,
				MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, envOpts{remote: client})
			s := bromSettings()
			s.Model = "gpt-4o-mini"
			e.put("brom", s)
			e.say("brom", "evt-1", "Hello?")
			r := e.do("POST", "/v1/npcs/brom/tick", "")
			if r.status != tt.status {
				t.Fatalf("tick = %d %s, want %d", r.status, r.body, tt.status)
			}
			if got := errorOf(t, r).Code; got != tt.code {
				t.Errorf("code = %q, want %q", got, tt.code)
			}
			if got := r.header.Get("Retry-After") != ""; got != (tt.status == 503) {
				t.Errorf("Retry-After %q with %d", r.header.Get("Retry-After"), tt.status)
			}
			if n, err := e.chars.PendingCount(context.Background(), "brom"); err != nil || n != 1 {
				t.Errorf("pending = %d, %v after a failed tick; want 1 (the event kept)", n, err)
			}
		})
	}
}

// An NPC may not name a remote model when npcd has no endpoint: its ticks
// would quietly run the builtin model instead. Nothing is stored.
func TestRemoteModelWithoutEndpointIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	body := `{"name": "Mira", "persona": "You are Mira, the healer.", "model": "gpt-4o"}`
	r := e.do("PUT", "/v1/npcs/mira", body)
	if r.status != 422 || errorOf(t, r).Code != CodeInvalidValue || !strings.Contains(errorOf(t, r).Message, "model") {
		t.Fatalf("PUT with a remote model and no endpoint = %d %s, want 422 invalid_value naming model", r.status, r.body)
	}
	if r := e.do("GET", "/v1/npcs/mira", ""); r.status != 404 {
		t.Errorf("the refused NPC exists: %d %s", r.status, r.body)
	}
	e.put("brom", bromSettings())
	if r := e.do("PUT", "/v1/npcs/brom", `{"name": "Brom", "persona": "You are Brom.", "model": "gpt-4o"}`); r.status != 422 {
		t.Fatalf("replacing brom's model = %d %s, want 422", r.status, r.body)
	}
	npc, err := e.client.GetNPC(context.Background(), "brom")
	if err != nil || npc.Model != llm.BuiltinModel || !strings.Contains(npc.Persona, "blacksmith") {
		t.Errorf("brom changed after a refused PUT: %+v, %v", npc, err)
	}
	if r := e.do("PUT", "/v1/npcs/mira", `{"name": "Mira", "persona": "You are Mira.", "model": "builtin"}`); r.status != 201 {
		t.Errorf("builtin model = %d %s, want 201", r.status, r.body)
	}
}
