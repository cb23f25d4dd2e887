package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/inspect"
	"github.com/npcd/npcd/internal/testdb"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/lease"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tick"
	"github.com/npcd/npcd/tools"
)

// env is a real engine on a real SQLite file behind the API, served by
// httptest.
type env struct {
	t       testing.TB
	db      *gorm.DB
	chars   *character.Store
	jour    *journal.Store
	eng     *tick.Engine
	metrics *Metrics
	srv     *Server
	ts      *httptest.Server
	client  *Client
	comp    *fakeCompactor
	records *sleep.Compactor
}

type envOpts struct {
	token     string
	maxBody   int64
	tick      tick.Config
	remote    llm.Chatter
	compactor bool // a fake compactor in the engine
	// realCompactor wires the real compactor (builtin summarizer).
	realCompactor bool
	log           io.Writer // where the Server logs; nowhere when nil
	sleeps        SleepSchedule
	// leases, when set, is the engine's lease manager on the env's
	// database, made by the function.
	leases func(db *gorm.DB) *lease.Manager
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	db := testdb.Open(t)
	e := &env{t: t, db: db, chars: character.NewStore(db), jour: journal.NewStore(db), metrics: NewMetrics()}
	deps := tick.Deps{DB: db, Characters: e.chars, Journal: e.jour, Internals: tools.NewInternals(e.jour, e.chars),
		Retriever: e.jour, Builtin: llm.NewBuiltin(), Owners: []tick.Owner{e.jour}, Remote: o.remote, Observer: e.metrics}
	var err error
	e.records, err = sleep.NewCompactor(sleep.CompactorDeps{DB: db, Characters: e.chars, Journal: e.jour, Builtin: llm.NewBuiltin()}, sleep.CompactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case o.compactor:
		e.comp = &fakeCompactor{}
		deps.Compactor = e.comp
	case o.realCompactor:
		deps.Compactor = e.records
		deps.Owners = append(deps.Owners, e.records)
	}
	if o.leases != nil {
		deps.Leases = o.leases(db)
	}
	if e.eng, err = tick.New(deps, o.tick); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Token: o.token, MaxBodyBytes: o.maxBody}
	if o.log != nil {
		cfg.Log = zerolog.New(o.log)
	}
	e.srv, err = New(cfg, Deps{Engine: e.eng, NPCs: e.chars, Journal: e.jour, Compactions: e.records, Metrics: e.metrics,
		Retriever: e.jour, Inspector: inspect.New(db), Sleeps: o.sleeps})
	if err != nil {
		t.Fatal(err)
	}
	e.ts = httptest.NewServer(e.srv)
	t.Cleanup(e.ts.Close)
	e.client = NewClient(e.ts.URL, o.token, e.ts.Client())
	return e
}

// bromSettings is a minimal NPC.
func bromSettings() NPCSettings {
	return NPCSettings{Name: "Brom", Persona: "You are Brom, the gruff village blacksmith of Oakvale."}
}

// put creates NPC id with settings through the API.
func (e *env) put(id string, s NPCSettings) *NPC {
	e.t.Helper()
	npc, _, err := e.client.PutNPC(context.Background(), id, s)
	if err != nil {
		e.t.Fatalf("PutNPC(%s): %v", id, err)
	}
	return npc
}

// say posts one say event from alice to NPC id.
func (e *env) say(id, evID, text string) {
	e.t.Helper()
	if _, err := e.client.PostEvents(context.Background(), id, []Event{{ID: evID, Kind: "say", Actor: "alice", Text: text}}); err != nil {
		e.t.Fatalf("PostEvents(%s): %v", id, err)
	}
}

// response is a raw HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a raw request; body is sent as is.
func (e *env) do(method, path, body string, header ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// leaks are texts that must never appear in an error body.
var leaks = []string{"SELECT", "sql", "gorm", "goroutine", "INSERT", "panic", "llm:", "tick:", "character:"}

// errorOf decodes an error response, failing the test when the body is not
// the one error shape or leaks internals.
func errorOf(t *testing.T, r response) ErrorDetail {
	t.Helper()
	var body ErrorBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	if body.Error.Code == "" || body.Error.Message == "" {
		t.Fatalf("error body %q lacks code or message", r.body)
	}
	for _, l := range leaks {
		if strings.Contains(string(r.body), l) {
			t.Errorf("error body %q contains %q", r.body, l)
		}
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	return body.Error
}

// wantAPIError checks err is an *APIError with status and code.
func wantAPIError(t *testing.T, err error, status int, code string) *APIError {
	t.Helper()
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want an *APIError %d %s", err, status, code)
	}
	if ae.Status != status || ae.Code != code {
		t.Fatalf("err = %d %s (%s), want %d %s", ae.Status, ae.Code, ae.Message, status, code)
	}
	for _, l := range leaks {
		if strings.Contains(ae.Message, l) {
			t.Errorf("message %q contains %q", ae.Message, l)
		}
	}
	return ae
}

// fakeCompactor compacts by reporting a record; it archives nothing.
type fakeCompactor struct {
	mu           sync.Mutex
	instructions []string
}

func (f *fakeCompactor) Compact(ctx context.Context, c *character.Character, trigger, instruction string) (*sleep.Record, *character.Character, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.instructions = append(f.instructions, instruction)
	if c.State.LiveMessages == 0 {
		return nil, c, nil
	}
	return &sleep.Record{ID: int64(len(f.instructions)), CharacterID: c.ID, Trigger: trigger, TokensBefore: c.ContextTokens(),
		TokensAfter: c.ContextTokens() / 2, MessagesCompacted: c.State.LiveMessages, Summarizer: sleep.SummarizerFallback}, c, nil
}

// scripted is a fake remote model. With fail set it fails every call;
// otherwise it calls look when it perceives an event and says what it saw
// once the game posted look's result.
type scripted struct {
	mu    sync.Mutex
	calls int
	fail  *llm.Error
}

func (s *scripted) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if s.fail != nil {
		return llm.Response{}, s.fail
	}
	last := req.Messages[len(req.Messages)-1]
	usage := llm.Usage{PromptTokens: 100, CompletionTokens: 10}
	switch last.Role {
	case llm.RoleUser:
		return llm.Response{Usage: usage, Message: llm.Message{Role: llm.RoleAssistant,
			ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("look_%d", n), Name: "look", Arguments: `{"where":"forge"}`}}}}, nil
	case llm.RoleTool:
		if last.Content == "ok" { // our own say was answered: the turn is over
			return llm.Response{Usage: usage, Message: llm.Message{Role: llm.RoleAssistant}}, nil
		}
		args, _ := json.Marshal(map[string]string{"text": "I see: " + last.Content})
		return llm.Response{Usage: usage, Message: llm.Message{Role: llm.RoleAssistant,
			ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("say_%d", n), Name: "say", Arguments: string(args)}}}}, nil
	}
	return llm.Response{Usage: usage, Message: llm.Message{Role: llm.RoleAssistant}}, nil
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// lookTools are say plus a returns:true look.
func lookTools() []Tool {
	return []Tool{
		{Name: "say", Description: "Say something aloud", Parameters: map[string]any{"type": "object",
			"properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []any{"text"}}},
		{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object",
			"properties": map[string]any{"where": map[string]any{"type": "string"}}}, Returns: true},
	}
}
