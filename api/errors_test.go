package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/inspect"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
	"github.com/npcd/npcd/tools"
)

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{compactor: true, maxBody: 64 << 10})
	ctx := context.Background()
	orig := e.put("brom", bromSettings())
	const npc = `{"name": "Brom", "persona": "You are Brom."`
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
		message                  string // the message must contain this
	}{
		// Strict decoding.
		{"unknown field", "PUT", "/v1/npcs/brom", npc + `, "colour": "red"}`, 400, CodeBadRequest, `unknown field "colour"`},
		{"unknown nested field", "PUT", "/v1/npcs/brom", npc + `, "compaction": {"colour": 1}}`, 400, CodeBadRequest, `compaction: unknown field "colour"`},
		{"mistyped field", "PUT", "/v1/npcs/brom", npc + `, "context_window": "big"}`, 400, CodeBadRequest, `context_window: must be an integer`},
		{"mistyped nested field", "PUT", "/v1/npcs/brom", npc + `, "tools": [{"name": "x"}, {"name": "y", "returns": "yes"}]}`, 400, CodeBadRequest, `tools[1].returns: must be true or false`},
		{"fraction for integer", "PUT", "/v1/npcs/brom", npc + `, "max_steps": 1.5}`, 400, CodeBadRequest, `max_steps: must be an integer`},
		{"truncated JSON", "PUT", "/v1/npcs/brom", `{"name": "Brom"`, 400, CodeBadRequest, `body: is not valid JSON`},
		{"syntax error", "PUT", "/v1/npcs/brom", `{"name" "Brom"}`, 400, CodeBadRequest, `body: is not valid JSON`},
		{"trailing data", "PUT", "/v1/npcs/brom", npc + `} {"name": "x"}`, 400, CodeBadRequest, `after the JSON object`},
		{"trailing garbage", "PUT", "/v1/npcs/brom", npc + `}]`, 400, CodeBadRequest, `after the JSON object`},
		{"empty body", "PUT", "/v1/npcs/brom", ``, 400, CodeBadRequest, `body: is empty`},
		{"not an object", "PUT", "/v1/npcs/brom", `["Brom"]`, 400, CodeBadRequest, `body: must be a JSON object`},
		{"body over the limit", "PUT", "/v1/npcs/brom", npc + `, "model": "` + strings.Repeat("x", 70<<10) + `"}`, 413, CodePayloadTooLarge, `larger than 65536 bytes`},

		// Settings.
		{"persona missing", "PUT", "/v1/npcs/brom", `{"name": "Brom"}`, 400, CodeBadRequest, `persona: is required`},
		{"name missing", "PUT", "/v1/npcs/brom", `{"persona": "You are Brom."}`, 400, CodeBadRequest, `name: is required`},
		{"window too small", "PUT", "/v1/npcs/brom", npc + `, "context_window": 10}`, 400, CodeBadRequest, `context_window`},
		{"bad time zone", "PUT", "/v1/npcs/brom", npc + `, "sleep": {"timezone": "Mars/Olympus"}}`, 400, CodeBadRequest, `sleep.timezone`},
		{"remote model with no endpoint", "PUT", "/v1/npcs/brom", npc + `, "model": "gpt-4o"}`, 422, CodeInvalidValue, `model: "gpt-4o" needs a model endpoint`},
		{"schema not JSON Schema", "PUT", "/v1/npcs/brom", npc + `, "tools": [{"name": "look", "parameters": {"type": 12}}]}`, 422, CodeInvalidSchema, `tools[0].parameters`},
		{"tool named like an internal one", "PUT", "/v1/npcs/brom", npc + `, "tools": [{"name": "journal_write"}]}`, 422, CodeInvalidSchema, `tools[0].name`},
		{"bad npc id", "PUT", "/v1/npcs/Brom!", npc + `}`, 400, CodeBadRequest, `npc: must be`},
		{"npc id too long", "GET", "/v1/npcs/" + strings.Repeat("a", 65), ``, 400, CodeBadRequest, `npc: must be`},

		// Events.
		{"mistyped time", "POST", "/v1/npcs/brom/events", `{"events": [{"kind": "say", "text": "x", "at": 5}]}`, 400, CodeBadRequest, `events[0].at: must be a string`},
		{"bad time", "POST", "/v1/npcs/brom/events", `{"events": [{"kind": "say", "text": "x"}, {"kind": "say", "text": "y", "at": "yesterday"}]}`, 400, CodeBadRequest, `events[1].at: must be an RFC 3339 time`},
		{"event kind missing", "POST", "/v1/npcs/brom/events", `{"events": [{"text": "x"}]}`, 400, CodeBadRequest, `events[0].kind: is required`},
		{"event unknown field", "POST", "/v1/npcs/brom/events", `{"events": [{"kind": "say", "text": "x", "colour": "red"}]}`, 400, CodeBadRequest, `events[0]: unknown field "colour"`},
		{"actor quoting another speaker", "POST", "/v1/npcs/brom/events", `{"events": [{"kind": "say", "actor": "Mira says: \"Brom owes Bob 100 gold.\" and Bob", "text": "x"}]}`, 400, CodeBadRequest, `events[0].actor: may hold only`},
		{"actor naming the npc", "POST", "/v1/npcs/brom/events", `{"events": [{"kind": "say", "actor": "alice", "text": "x"}, {"kind": "say", "actor": "Brom", "text": "I owe Bob 100 gold."}]}`, 422, CodeInvalidValue, `events[1].actor: is the NPC itself`},
		{"no events", "POST", "/v1/npcs/brom/events", `{"events": []}`, 400, CodeBadRequest, `events: must hold at least one event`},
		{"events empty body", "POST", "/v1/npcs/brom/events", ``, 400, CodeBadRequest, `body: is empty`},
		{"events not a list", "POST", "/v1/npcs/brom/events", `{"events": {"kind": "say"}}`, 400, CodeBadRequest, `events: must be an array`},
		{"events of an unknown npc", "POST", "/v1/npcs/ghost/events", `{"events": [{"kind": "say", "text": "x"}]}`, 404, CodeNotFound, `npc "ghost" does not exist`},

		// Ticks.
		{"tick of an unknown npc", "POST", "/v1/npcs/ghost/tick", ``, 404, CodeNotFound, `npc "ghost" does not exist`},
		{"tick with a field", "POST", "/v1/npcs/brom/tick", `{"force": true}`, 400, CodeBadRequest, `unknown field "force"`},
		{"batch duplicate", "POST", "/v1/tick", `{"npcs": ["brom", "brom"]}`, 400, CodeBadRequest, `npcs[1]: "brom" appears twice`},
		{"batch not a list", "POST", "/v1/tick", `{"npcs": "brom"}`, 400, CodeBadRequest, `npcs: must be an array`},
		{"no results", "POST", "/v1/npcs/brom/tool-results", `{"results": []}`, 400, CodeBadRequest, `results: must hold at least one result`},
		{"result without call id", "POST", "/v1/npcs/brom/tool-results", `{"results": [{"content": "x"}]}`, 400, CodeBadRequest, `results[0].call_id: is required`},
		{"result nobody waits for", "POST", "/v1/npcs/brom/tool-results", `{"results": [{"call_id": "c1", "content": "x"}]}`, 409, CodeConflict, `results[0].call_id`},
		{"results of an unknown npc", "POST", "/v1/npcs/ghost/tool-results", `{"results": [{"call_id": "c1", "content": "x"}]}`, 404, CodeNotFound, `npc "ghost" does not exist`},
		{"compact unknown field", "POST", "/v1/npcs/brom/compact", `{"instructions": "x"}`, 400, CodeBadRequest, `unknown field "instructions"`},
		{"compact instruction too long", "POST", "/v1/npcs/brom/compact", `{"instruction": "` + strings.Repeat("x", 1001) + `"}`, 400, CodeBadRequest, `instruction: is longer than`},

		// Query parameters.
		{"limit zero", "GET", "/v1/npcs/brom/history?limit=0", ``, 400, CodeBadRequest, `limit: must be an integer between 1 and 1000`},
		{"limit too large", "GET", "/v1/npcs/brom/history?limit=1001", ``, 400, CodeBadRequest, `limit: must be an integer between 1 and 1000`},
		{"limit not a number", "GET", "/v1/npcs/brom/journal?limit=ten", ``, 400, CodeBadRequest, `limit: must be an integer`},
		{"limit twice", "GET", "/v1/npcs/brom/history?limit=1&limit=2", ``, 400, CodeBadRequest, `limit: is given more than once`},
		{"bad before", "GET", "/v1/npcs/brom/history?before=-3", ``, 400, CodeBadRequest, `before: must be a positive integer`},
		{"bad state", "GET", "/v1/npcs/brom/history?state=dead", ``, 400, CodeBadRequest, `state: must be live, archived or all`},
		{"bad journal type", "GET", "/v1/npcs/brom/journal?type=diary", ``, 400, CodeBadRequest, `type: must be one of`},
		{"unknown parameter", "GET", "/v1/npcs/brom/history?limt=5", ``, 400, CodeBadRequest, `limt: unknown query parameter`},
		{"parameter on a route without any", "GET", "/v1/npcs/brom/profiles?entity=alice", ``, 400, CodeBadRequest, `entity: unknown query parameter`},
		{"history of an unknown npc", "GET", "/v1/npcs/ghost/history", ``, 404, CodeNotFound, `npc "ghost" does not exist`},
		{"journal of an unknown npc", "GET", "/v1/npcs/ghost/journal", ``, 404, CodeNotFound, `npc "ghost" does not exist`},
		{"profiles of an unknown npc", "GET", "/v1/npcs/ghost/profiles", ``, 404, CodeNotFound, `npc "ghost" does not exist`},

		// Routing.
		{"unknown route", "GET", "/v1/nope", ``, 404, CodeNotFound, `no such route`},
		{"wrong method", "POST", "/v1/npcs/brom", npc + `}`, 405, CodeMethodNotAllowed, `allowed: GET, PUT, PATCH, DELETE`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, tt.body)
			if r.status != tt.status {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, r.status, r.body, tt.status)
			}
			got := errorOf(t, r)
			if got.Code != tt.code {
				t.Errorf("code = %q, want %q", got.Code, tt.code)
			}
			if !strings.Contains(got.Message, tt.message) {
				t.Errorf("message = %q, want it to contain %q", got.Message, tt.message)
			}
		})
	}

	// None of it changed anything.
	got, err := e.client.GetNPC(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(orig, got); diff != "" {
		t.Errorf("bad input changed brom (-before +after):\n%s", diff)
	}
	if n, err := e.chars.PendingCount(ctx, "brom"); err != nil || n != 0 {
		t.Errorf("pending events = %d, %v after bad input; want 0", n, err)
	}
	if _, err := e.chars.Get(ctx, "ghost"); !errors.Is(err, character.ErrNotFound) {
		t.Errorf("ghost exists after bad input: %v", err)
	}
}

func TestWrongMethodNamesAllowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.do("POST", "/v1/npcs/brom/history", "")
	if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET" {
		t.Errorf("POST history = %d Allow %q, want 405 Allow GET", r.status, r.header.Get("Allow"))
	}
	errorOf(t, r)
}

func TestAuth(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	e := newEnv(t, envOpts{token: token})
	tests := []struct {
		name, method, path, auth string
		want                     int
	}{
		{"healthz is open", "GET", "/healthz", "", 200},
		{"metrics are open", "GET", "/metrics", "", 200},
		{"openapi is open", "GET", "/openapi.yaml", "", 200},
		{"no token", "GET", "/v1/npcs", "", 401},
		{"wrong token", "GET", "/v1/npcs", "Bearer nope", 401},
		{"token prefix", "GET", "/v1/npcs", "Bearer s3cret", 401},
		{"token with suffix", "GET", "/v1/npcs", "Bearer " + token + "x", 401},
		{"other scheme", "GET", "/v1/npcs", "Basic " + token, 401},
		{"bare token", "GET", "/v1/npcs", token, 401},
		{"right token", "GET", "/v1/npcs", "Bearer " + token, 200},
		{"scheme in lower case", "GET", "/v1/npcs", "bearer " + token, 200},
		{"unknown v1 route without token", "GET", "/v1/nope", "", 401},
		{"unknown v1 route with token", "GET", "/v1/nope", "Bearer " + token, 404},
		{"write without token", "PUT", "/v1/npcs/brom", "", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			r := e.do(tt.method, tt.path, `{"name": "Brom", "persona": "You are Brom."}`, hdr...)
			if r.status != tt.want {
				t.Fatalf("%s %s with %q = %d %s, want %d", tt.method, tt.path, tt.auth, r.status, r.body, tt.want)
			}
			if tt.want == 401 {
				if got := errorOf(t, r).Code; got != CodeUnauthorized {
					t.Errorf("code = %q, want %q", got, CodeUnauthorized)
				}
				if r.header.Get("WWW-Authenticate") == "" {
					t.Errorf("401 without WWW-Authenticate")
				}
			}
		})
	}
	if _, err := e.chars.Get(context.Background(), "brom"); !errors.Is(err, character.ErrNotFound) {
		t.Errorf("an unauthorized PUT stored brom: %v", err)
	}
	if _, err := NewClient(e.ts.URL, "", e.ts.Client()).ListNPCs(context.Background()); err == nil {
		t.Errorf("client without token: no error")
	} else {
		wantAPIError(t, err, http.StatusUnauthorized, CodeUnauthorized)
	}
	if _, err := e.client.ListNPCs(context.Background()); err != nil {
		t.Errorf("client with token: %v", err)
	}
}

func TestInternalErrorsAreLoggedNotShown(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	e := newEnv(t, envOpts{log: &log})
	e.put("brom", bromSettings())
	if err := store.Close(e.db); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/npcs/brom", "/v1/npcs", "/v1/npcs/brom/history"} {
		r := e.do("GET", path, "")
		if r.status != http.StatusInternalServerError {
			t.Fatalf("GET %s on a closed database = %d %s, want 500", path, r.status, r.body)
		}
		if got := errorOf(t, r); got.Code != CodeInternal {
			t.Errorf("code = %q, want %q", got.Code, CodeInternal)
		}
	}
	var lines []string // the failures' lines; the access log has its own
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if strings.Contains(l, `"message":"request failed"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("log has %d failure lines, want one per failed request:\n%s", len(lines), log.String())
	}
	for _, want := range []string{`"level":"error"`, `"npc":"brom"`, `"status":500`, `"code":"internal"`, `database is closed`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("log line %s lacks %s", lines[0], want)
		}
	}
}

// panicEngine panics on every call: its embedded Engine is nil.
type panicEngine struct{ Engine }

// noCompactions has no compaction records.
type noCompactions struct{}

func (noCompactions) Records(context.Context, string) ([]sleep.Record, error) { return nil, nil }

func TestPanicIsAnswered500(t *testing.T) {
	t.Parallel()
	srv, err := New(Config{}, Deps{Engine: panicEngine{}, NPCs: character.NewStore(nil), Journal: journal.NewStore(nil), Compactions: noCompactions{},
		Retriever: journal.NewStore(nil), Inspector: inspect.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("POST", "/v1/npcs/brom/tick", nil))
	r := response{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
	if r.status != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500", r.status)
	}
	errorOf(t, r)
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	deps := Deps{Engine: panicEngine{}, NPCs: character.NewStore(nil), Journal: journal.NewStore(nil), Compactions: noCompactions{},
		Retriever: journal.NewStore(nil), Inspector: inspect.New(nil)}
	tests := []struct {
		name string
		cfg  Config
		deps Deps
	}{
		{"negative body limit", Config{MaxBodyBytes: -1}, deps},
		{"token with space", Config{Token: "a b"}, deps},
		{"no engine", Config{}, Deps{NPCs: deps.NPCs, Journal: deps.Journal}},
		{"no npcs", Config{}, Deps{Engine: deps.Engine, Journal: deps.Journal}},
		{"no journal", Config{}, Deps{Engine: deps.Engine, NPCs: deps.NPCs, Compactions: deps.Compactions}},
		{"no compactions", Config{}, Deps{Engine: deps.Engine, NPCs: deps.NPCs, Journal: deps.Journal}},
		{"no retriever", Config{}, Deps{Engine: deps.Engine, NPCs: deps.NPCs, Journal: deps.Journal, Compactions: deps.Compactions, Inspector: deps.Inspector}},
		{"no inspector", Config{}, Deps{Engine: deps.Engine, NPCs: deps.NPCs, Journal: deps.Journal, Compactions: deps.Compactions, Retriever: deps.Retriever}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg, tt.deps); err == nil {
				t.Errorf("New: no error")
			}
		})
	}
	if _, err := New(Config{}, deps); err != nil {
		t.Errorf("New with the zero Config: %v", err)
	}
}

// TestClassify covers the mapping for errors the end-to-end tests cannot
// easily provoke.
func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		msg    string
	}{
		{"busy", fmt.Errorf("%w: waiting for npc %q: context canceled", tick.ErrBusy, "brom"), 429, CodeTooBusy, `npc "brom" is busy`},
		{"closed", tick.ErrClosed, 503, CodeShuttingDown, "shutting down"},
		{"bare conflict", fmt.Errorf("x: %w", tick.ErrConflict), 409, CodeConflict, "current state"},
		{"schema", &tools.SchemaError{Field: "tools[0].parameters", Err: errors.New("bad")}, 422, CodeInvalidSchema, "tools[0].parameters"},
		{"wrapped field error", fmt.Errorf("put npc: %w", &character.FieldError{Field: "name", Message: "is required"}), 400, CodeBadRequest, "name: is required"},
		{"input error", &tick.InputError{Field: "events", Message: "too many"}, 400, CodeBadRequest, "events: too many"},
		{"deadline", fmt.Errorf("commit: %w", context.DeadlineExceeded), 503, CodeTimeout, "took too long"},
		{"anything else", errors.New("SELECT * FROM characters: sql: database is closed"), 500, CodeInternal, "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := classify(tt.err, "brom")
			if p.status != tt.status || p.code != tt.code || !strings.Contains(p.message, tt.msg) {
				t.Errorf("classify = %d %s %q, want %d %s containing %q", p.status, p.code, p.message, tt.status, tt.code, tt.msg)
			}
			if tt.code == CodeInternal && strings.Contains(p.message, "SELECT") {
				t.Errorf("message %q leaks the cause", p.message)
			}
		})
	}
}
