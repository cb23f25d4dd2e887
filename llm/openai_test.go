package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/npcd/npcd/internal/version"
)

// reply is one scripted answer of the fake server.
type reply struct {
	status int               // default 200
	header map[string]string // Content-Type defaults to application/json
	body   string
	hangup bool                    // close the connection without answering
	slow   bool                    // answer only once the client gives up
	fn     func(body []byte) reply // computes the reply from the request body
}

type recorded struct {
	path string
	body []byte
	auth string
	ua   string
}

// fakeServer is an OpenAI-compatible server under /v1 that answers each
// path from its script in order, repeating the last reply once the script
// runs out, and records every request.
type fakeServer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	script map[string][]reply // by path below /v1
	reqs   []recorded
}

func newFakeServer(t *testing.T, script map[string][]reply) *fakeServer {
	t.Helper()
	f := &fakeServer{script: script}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		path := strings.TrimPrefix(r.URL.Path, "/v1")
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{path: path, body: body, auth: r.Header.Get("Authorization"), ua: r.Header.Get("User-Agent")})
		q := f.script[path]
		if len(q) == 0 {
			f.mu.Unlock()
			t.Errorf("fake server: unscripted request to %s", r.URL.Path)
			http.NotFound(w, r)
			return
		}
		rep := q[0]
		if len(q) > 1 {
			f.script[path] = q[1:]
		}
		f.mu.Unlock()
		if rep.fn != nil {
			rep = rep.fn(body)
		}
		serve(w, r, rep)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func serve(w http.ResponseWriter, r *http.Request, rep reply) {
	switch {
	case rep.hangup:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	case rep.slow:
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	io.WriteString(w, rep.body)
}

func (f *fakeServer) baseURL() string { return f.srv.URL + "/v1" }

// requests returns the recorded requests to path.
func (f *fakeServer) requests(path string) []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []recorded
	for _, r := range f.reqs {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// fakeSleeper records the waits the client asks for and returns at once.
type fakeSleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *fakeSleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *fakeSleeper) recorded() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// newTestClient returns a client for f with a fake sleeper, after applying
// edit to a config with two retries.
func newTestClient(t *testing.T, baseURL string, edit func(*ClientConfig)) (*Client, *fakeSleeper) {
	t.Helper()
	cfg := ClientConfig{BaseURL: baseURL, APIKey: "sk-test", Model: "test-model", MaxRetries: 2, Timeout: 5 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	s := &fakeSleeper{}
	c.sleep = s.sleep
	return c, s
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// chatOK is a successful completion whose first choice is msg.
func chatOK(t *testing.T, msg map[string]any, finish string) reply {
	return reply{body: mustJSON(t, map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
	})}
}

func textOK(t *testing.T, content string) reply {
	return chatOK(t, map[string]any{"role": "assistant", "content": content}, "stop")
}

func apiError(status int, code any, typ, message string) reply {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": code}})
	return reply{status: status, body: string(b)}
}

// decodeJSON decodes s into a generic value for cmp.
func decodeJSON(t *testing.T, s []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(s, &v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

var pingSchema = json.RawMessage(`{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}`)

func TestChat(t *testing.T) {
	tests := []struct {
		name  string
		reply func(t *testing.T) reply
		req   Request
		want  Response
		// wire is the JSON body the server must receive.
		wire string
	}{
		{
			name:  "plain text",
			reply: func(t *testing.T) reply { return textOK(t, "Well met, traveller.") },
			req: Request{Task: TaskTick, Messages: []Message{
				{Role: RoleSystem, Content: "You are Brom, a blacksmith."},
				{Role: RoleUser, Content: "Hello!", Name: "ayla"},
			}},
			want: Response{
				Message:      Message{Role: RoleAssistant, Content: "Well met, traveller."},
				Usage:        Usage{PromptTokens: 12, CompletionTokens: 3},
				FinishReason: "stop",
			},
			wire: `{"model":"test-model","stream":false,"messages":[
				{"role":"system","content":"You are Brom, a blacksmith."},
				{"role":"user","content":"Hello!","name":"ayla"}]}`,
		},
		{
			name: "tool call with tools and a tool_call_id round trip",
			reply: func(t *testing.T) reply {
				return chatOK(t, map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
					"id": "call_2", "type": "function",
					"function": map[string]any{"name": "say", "arguments": `{"text":"Done."}`},
				}}}, "tool_calls")
			},
			req: Request{
				Model:     "other-model",
				MaxTokens: 200,
				Messages: []Message{
					{Role: RoleUser, Content: "Ping Ayla."},
					{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "ping", Arguments: `{"target":"ayla"}`}}},
					{Role: RoleTool, ToolCallID: "call_1", Name: "ping", Content: "pong"},
				},
				Tools: []Tool{
					{Name: "ping", Description: "Ping someone.", Parameters: pingSchema},
					{Name: "wait"},
				},
			},
			want: Response{
				Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{
					{ID: "call_2", Name: "say", Arguments: `{"text":"Done."}`},
				}},
				Usage:        Usage{PromptTokens: 12, CompletionTokens: 3},
				FinishReason: "tool_calls",
			},
			wire: `{"model":"other-model","stream":false,"max_tokens":200,
				"messages":[
					{"role":"user","content":"Ping Ayla."},
					{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"ping","arguments":"{\"target\":\"ayla\"}"}}]},
					{"role":"tool","content":"pong","name":"ping","tool_call_id":"call_1"}],
				"tools":[
					{"type":"function","function":{"name":"ping","description":"Ping someone.",
						"parameters":{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}}},
					{"type":"function","function":{"name":"wait","parameters":{"type":"object","properties":{}}}}]}`,
		},
		{
			name: "malformed tool-call arguments pass through unchanged",
			reply: func(t *testing.T) reply {
				return chatOK(t, map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
					"id": "call_9", "type": "function",
					"function": map[string]any{"name": "give", "arguments": `{"item": "sword", "to": ` + "\n"},
				}}}, "tool_calls")
			},
			req: Request{Messages: []Message{{Role: RoleUser, Content: "Give me the sword."}}},
			want: Response{
				Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{
					{ID: "call_9", Name: "give", Arguments: `{"item": "sword", "to": ` + "\n"},
				}},
				Usage:        Usage{PromptTokens: 12, CompletionTokens: 3},
				FinishReason: "tool_calls",
			},
			wire: `{"model":"test-model","stream":false,"messages":[{"role":"user","content":"Give me the sword."}]}`,
		},
		{
			name:  "json schema becomes response_format",
			reply: func(t *testing.T) reply { return textOK(t, `{"target":"ayla"}`) },
			req: Request{
				Task:       TaskExtract,
				Messages:   []Message{{Role: RoleUser, Content: "Extract."}},
				JSONSchema: pingSchema,
			},
			want: Response{
				Message:      Message{Role: RoleAssistant, Content: `{"target":"ayla"}`},
				Usage:        Usage{PromptTokens: 12, CompletionTokens: 3},
				FinishReason: "stop",
			},
			wire: `{"model":"test-model","stream":false,"messages":[{"role":"user","content":"Extract."}],
				"response_format":{"type":"json_schema","json_schema":{"name":"answer","strict":false,
					"schema":{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}}}}`,
		},
		{
			name:  "named schema",
			reply: func(t *testing.T) reply { return textOK(t, `{}`) },
			req: Request{
				Messages:   []Message{{Role: RoleUser, Content: "Extract."}},
				JSONSchema: json.RawMessage(`{"type":"object"}`),
				SchemaName: "facts",
			},
			want: Response{
				Message:      Message{Role: RoleAssistant, Content: `{}`},
				Usage:        Usage{PromptTokens: 12, CompletionTokens: 3},
				FinishReason: "stop",
			},
			wire: `{"model":"test-model","stream":false,"messages":[{"role":"user","content":"Extract."}],
				"response_format":{"type":"json_schema","json_schema":{"name":"facts","strict":false,"schema":{"type":"object"}}}}`,
		},
		{
			name:  "reasoning model gets max_completion_tokens",
			reply: func(t *testing.T) reply { return textOK(t, "ok") },
			req:   Request{Model: "o3-mini", MaxTokens: 50, Messages: []Message{{Role: RoleUser, Content: "Hi"}}},
			want: Response{
				Message:      Message{Role: RoleAssistant, Content: "ok"},
				Usage:        Usage{PromptTokens: 12, CompletionTokens: 3},
				FinishReason: "stop",
			},
			wire: `{"model":"o3-mini","stream":false,"max_completion_tokens":50,"messages":[{"role":"user","content":"Hi"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, map[string][]reply{"/chat/completions": {tt.reply(t)}})
			c, _ := newTestClient(t, f.baseURL(), nil)

			got, err := c.Chat(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Chat response mismatch (-want +got):\n%s", diff)
			}
			reqs := f.requests("/chat/completions")
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			if got, want := reqs[0].auth, "Bearer sk-test"; got != want {
				t.Errorf("Authorization = %q, want %q", got, want)
			}
			if got, want := reqs[0].ua, version.UserAgent(); got != want {
				t.Errorf("User-Agent = %q, want %q", got, want)
			}
			if diff := cmp.Diff(decodeJSON(t, []byte(tt.wire)), decodeJSON(t, reqs[0].body)); diff != "" {
				t.Errorf("request body mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChatErrors(t *testing.T) {
	const vllmOverflow = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens " +
		"(4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."
	asAPIError := func(err error) bool { var e *openai.APIError; return errors.As(err, &e) }
	asRequestError := func(err error) bool { var e *openai.RequestError; return errors.As(err, &e) }
	plain := Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}}

	tests := []struct {
		name         string
		replies      func(t *testing.T) []reply
		req          *Request // default plain
		wantCode     Code
		wantStatus   int
		wantAttempts int // with MaxRetries 2
		wantCause    func(error) bool
	}{
		{
			name: "429 forever",
			replies: func(*testing.T) []reply {
				return []reply{apiError(429, "rate_limit_exceeded", "requests", "Rate limit reached")}
			},
			wantCode:     CodeRateLimit,
			wantStatus:   429,
			wantAttempts: 3,
			wantCause:    asAPIError,
		},
		{
			name: "500 forever",
			replies: func(*testing.T) []reply {
				return []reply{apiError(500, nil, "server_error", "The server had an error")}
			},
			wantCode:     CodeUnavailable,
			wantStatus:   500,
			wantAttempts: 3,
			wantCause:    asAPIError,
		},
		{
			name: "html 502 from a proxy",
			replies: func(*testing.T) []reply {
				return []reply{{status: 502, header: map[string]string{"Content-Type": "text/html"},
					body: "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"}}
			},
			wantCode:     CodeUnavailable,
			wantStatus:   502,
			wantAttempts: 3,
			wantCause:    asRequestError,
		},
		{
			name: "openai context_length_exceeded",
			replies: func(*testing.T) []reply {
				return []reply{apiError(400, "context_length_exceeded", "invalid_request_error", "Your input exceeds the context window of this model.")}
			},
			wantCode:     CodeOverflow,
			wantStatus:   400,
			wantAttempts: 1,
			wantCause:    asAPIError,
		},
		{
			name:         "vllm overflow with a numeric code",
			replies:      func(*testing.T) []reply { return []reply{apiError(400, 400, "BadRequestError", vllmOverflow)} },
			wantCode:     CodeOverflow,
			wantStatus:   400,
			wantAttempts: 1,
			wantCause:    asAPIError,
		},
		{
			name: "older vllm overflow outside an error object",
			replies: func(t *testing.T) []reply {
				return []reply{{status: 400, body: mustJSON(t, map[string]any{
					"object": "error", "message": vllmOverflow, "type": "BadRequestError", "param": nil, "code": 400})}}
			},
			wantCode:     CodeOverflow,
			wantStatus:   400,
			wantAttempts: 1,
			wantCause:    asRequestError,
		},
		{
			name: "llama.cpp overflow",
			replies: func(*testing.T) []reply {
				return []reply{{status: 400, body: `{"error":{"code":400,"message":"request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9412,"n_ctx":8192}}`}}
			},
			wantCode:     CodeOverflow,
			wantStatus:   400,
			wantAttempts: 1,
			wantCause:    asAPIError,
		},
		{
			name: "ollama overflow reported as 500 is not retried",
			replies: func(*testing.T) []reply {
				return []reply{apiError(500, nil, "api_error", "the input length exceeds the context length")}
			},
			wantCode:     CodeOverflow,
			wantStatus:   500,
			wantAttempts: 1,
			wantCause:    asAPIError,
		},
		{
			name: "401",
			replies: func(*testing.T) []reply {
				return []reply{apiError(401, "invalid_api_key", "invalid_request_error", "Incorrect API key provided")}
			},
			wantCode:     CodeAuth,
			wantStatus:   401,
			wantAttempts: 1,
			wantCause:    asAPIError,
		},
		{
			name: "403",
			replies: func(*testing.T) []reply {
				return []reply{apiError(403, nil, "forbidden", "Project does not have access")}
			},
			wantCode:     CodeAuth,
			wantStatus:   403,
			wantAttempts: 1,
			wantCause:    asAPIError,
		},
		{
			name: "404 unknown model",
			replies: func(*testing.T) []reply {
				return []reply{apiError(404, "model_not_found", "invalid_request_error", "The model does not exist")}
			},
			wantCode:     CodeBadRequest,
			wantStatus:   404,
			wantAttempts: 1,
			wantCause:    asAPIError,
		},
		{
			name: "other 400",
			replies: func(*testing.T) []reply {
				return []reply{apiError(400, nil, "invalid_request_error", "Invalid value for 'role'")}
			},
			wantCode:     CodeBadRequest,
			wantStatus:   400,
			wantAttempts: 1,
			wantCause:    asAPIError,
		},
		{
			name:         "no choices",
			replies:      func(*testing.T) []reply { return []reply{{body: `{"id":"x","object":"chat.completion","choices":[]}`}} },
			wantCode:     CodeBadResponse,
			wantStatus:   200,
			wantAttempts: 1,
		},
		{
			name: "200 with a body that is not JSON",
			replies: func(*testing.T) []reply {
				return []reply{{header: map[string]string{"Content-Type": "text/html"}, body: "<html>maintenance</html>"}}
			},
			wantCode:     CodeBadResponse,
			wantStatus:   200,
			wantAttempts: 1,
			wantCause:    func(err error) bool { var e *json.SyntaxError; return errors.As(err, &e) },
		},
		{
			name: "200 whose body is cut off",
			replies: func(*testing.T) []reply {
				return []reply{{body: `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hel`}}
			},
			wantCode:     CodeUnavailable,
			wantStatus:   200,
			wantAttempts: 3,
		},
		{
			name: "200 whose connection drops mid-body",
			replies: func(*testing.T) []reply {
				return []reply{{header: map[string]string{"Content-Length": "400"}, body: `{"id":"x","object":"chat.completion","choices":[{"index":0,`}}
			},
			wantCode:     CodeUnavailable,
			wantStatus:   200,
			wantAttempts: 3,
		},
		{
			name: "tool call without a function name",
			replies: func(t *testing.T) []reply {
				return []reply{chatOK(t, map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
					"id": "call_1", "type": "function", "function": map[string]any{"name": "", "arguments": "{}"},
				}}}, "tool_calls")}
			},
			wantCode:     CodeBadToolCall,
			wantStatus:   200,
			wantAttempts: 1,
		},
		{
			name:         "tool schema that is not JSON is refused before sending",
			replies:      func(t *testing.T) []reply { return []reply{textOK(t, "unreachable")} },
			req:          &Request{Messages: plain.Messages, Tools: []Tool{{Name: "bad", Parameters: json.RawMessage(`{"type":`)}}},
			wantCode:     CodeBadRequest,
			wantStatus:   0,
			wantAttempts: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, map[string][]reply{"/chat/completions": tt.replies(t)})
			c, sleeper := newTestClient(t, f.baseURL(), nil)
			req := plain
			if tt.req != nil {
				req = *tt.req
			}

			_, err := c.Chat(context.Background(), req)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Chat error = %v (%T), want *llm.Error", err, err)
			}
			if e.Code != tt.wantCode {
				t.Errorf("code = %q, want %q (err: %v)", e.Code, tt.wantCode, err)
			}
			if e.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", e.StatusCode, tt.wantStatus)
			}
			if got := len(f.requests("/chat/completions")); got != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", got, tt.wantAttempts)
			}
			if got, want := len(sleeper.recorded()), max(tt.wantAttempts-1, 0); got != want {
				t.Errorf("waits = %d, want %d", got, want)
			}
			if tt.wantCause != nil && !tt.wantCause(e.Unwrap()) {
				t.Errorf("cause %T (%v) is not the expected type", e.Unwrap(), e.Unwrap())
			}
		})
	}
}

// A tool call without a name still returns the model's message so the
// caller can answer the model.
func TestChatBadToolCallKeepsResponse(t *testing.T) {
	f := newFakeServer(t, map[string][]reply{"/chat/completions": {chatOK(t, map[string]any{"role": "assistant", "tool_calls": []any{
		map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "say", "arguments": `{"text":"hi"}`}},
		map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"arguments": "{}"}},
	}}, "tool_calls")}})
	c, _ := newTestClient(t, f.baseURL(), nil)

	got, err := c.Chat(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
	if CodeOf(err) != CodeBadToolCall {
		t.Fatalf("code = %q, want %q (err: %v)", CodeOf(err), CodeBadToolCall, err)
	}
	want := []ToolCall{{ID: "call_1", Name: "say", Arguments: `{"text":"hi"}`}, {ID: "call_2", Arguments: "{}"}}
	if diff := cmp.Diff(want, got.Message.ToolCalls); diff != "" {
		t.Errorf("tool calls mismatch (-want +got):\n%s", diff)
	}
}

func TestChatRetriesThenSucceeds(t *testing.T) {
	between := func(lo, hi time.Duration) func(time.Duration) bool {
		return func(d time.Duration) bool { return d >= lo && d <= hi }
	}
	exactly := func(want time.Duration) func(time.Duration) bool {
		return func(d time.Duration) bool { return d == want }
	}
	tests := []struct {
		name    string
		replies func(t *testing.T) []reply
		edit    func(*ClientConfig)
		// waits checks each wait between attempts, in order.
		waits []func(time.Duration) bool
	}{
		{
			name: "429 with Retry-After seconds",
			replies: func(t *testing.T) []reply {
				r := apiError(429, "rate_limit_exceeded", "requests", "Rate limit reached")
				r.header = map[string]string{"Retry-After": "1"}
				return []reply{r, textOK(t, "ok")}
			},
			waits: []func(time.Duration) bool{exactly(time.Second)},
		},
		{
			name: "503 with Retry-After as an HTTP date",
			replies: func(t *testing.T) []reply {
				r := apiError(503, nil, "overloaded", "Overloaded")
				r.header = map[string]string{"Retry-After": time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)}
				return []reply{r, textOK(t, "ok")}
			},
			// The date has one-second resolution.
			waits: []func(time.Duration) bool{between(time.Second, 3*time.Second)},
		},
		{
			name: "Retry-After capped at MaxBackoff",
			replies: func(t *testing.T) []reply {
				r := apiError(429, nil, "requests", "Rate limit reached")
				r.header = map[string]string{"Retry-After": "120"}
				return []reply{r, textOK(t, "ok")}
			},
			edit:  func(c *ClientConfig) { c.MaxBackoff = 2 * time.Second },
			waits: []func(time.Duration) bool{exactly(2 * time.Second)},
		},
		{
			name: "500 then success waits a jittered backoff",
			replies: func(t *testing.T) []reply {
				return []reply{apiError(500, nil, "server_error", "oops"), textOK(t, "ok")}
			},
			edit:  func(c *ClientConfig) { c.MinBackoff = 100 * time.Millisecond },
			waits: []func(time.Duration) bool{between(50*time.Millisecond, 100*time.Millisecond)},
		},
		{
			name: "backoff doubles up to MaxBackoff",
			replies: func(t *testing.T) []reply {
				e := apiError(503, nil, "overloaded", "no Retry-After here")
				return []reply{e, e, e, textOK(t, "ok")}
			},
			edit: func(c *ClientConfig) {
				c.MaxRetries = 3
				c.MinBackoff = 100 * time.Millisecond
				c.MaxBackoff = 250 * time.Millisecond
			},
			waits: []func(time.Duration) bool{
				between(50*time.Millisecond, 100*time.Millisecond),
				between(100*time.Millisecond, 200*time.Millisecond),
				between(125*time.Millisecond, 250*time.Millisecond),
			},
		},
		{
			name: "html 502 then success",
			replies: func(t *testing.T) []reply {
				return []reply{{status: 502, header: map[string]string{"Content-Type": "text/html"}, body: "<html>502</html>"}, textOK(t, "ok")}
			},
			edit:  func(c *ClientConfig) { c.MinBackoff = 10 * time.Millisecond },
			waits: []func(time.Duration) bool{between(5*time.Millisecond, 10*time.Millisecond)},
		},
		{
			name: "dropped connection then success",
			replies: func(t *testing.T) []reply {
				return []reply{{hangup: true}, textOK(t, "ok")}
			},
			edit:  func(c *ClientConfig) { c.MinBackoff = 10 * time.Millisecond },
			waits: []func(time.Duration) bool{between(5*time.Millisecond, 10*time.Millisecond)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, map[string][]reply{"/chat/completions": tt.replies(t)})
			c, sleeper := newTestClient(t, f.baseURL(), tt.edit)

			got, err := c.Chat(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if got.Message.Content != "ok" {
				t.Errorf("content = %q, want %q", got.Message.Content, "ok")
			}
			if got, want := len(f.requests("/chat/completions")), len(tt.waits)+1; got != want {
				t.Errorf("attempts = %d, want %d", got, want)
			}
			waits := sleeper.recorded()
			if len(waits) != len(tt.waits) {
				t.Fatalf("waits = %v, want %d of them", waits, len(tt.waits))
			}
			for i, ok := range tt.waits {
				if !ok(waits[i]) {
					t.Errorf("wait %d = %v, outside the expected range", i, waits[i])
				}
			}
		})
	}
}

func TestChatTimeouts(t *testing.T) {
	t.Run("slow response past the client Timeout", func(t *testing.T) {
		f := newFakeServer(t, map[string][]reply{"/chat/completions": {{slow: true}}})
		c, sleeper := newTestClient(t, f.baseURL(), func(c *ClientConfig) {
			c.Timeout = 50 * time.Millisecond
			c.MaxRetries = 1
		})

		_, err := c.Chat(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
		if got := CodeOf(err); got != CodeTimeout {
			t.Fatalf("code = %q, want %q (err: %v)", got, CodeTimeout, err)
		}
		var netErr net.Error
		if !errors.As(err, &netErr) || !netErr.Timeout() {
			t.Errorf("cause %v is not a net.Error timeout", err)
		}
		// The ctx had time left, so the attempt was retried.
		if got := len(f.requests("/chat/completions")); got != 2 {
			t.Errorf("attempts = %d, want 2", got)
		}
		if got := len(sleeper.recorded()); got != 1 {
			t.Errorf("waits = %d, want 1", got)
		}
	})
	t.Run("ctx deadline stops at once", func(t *testing.T) {
		f := newFakeServer(t, map[string][]reply{"/chat/completions": {{slow: true}}})
		c, sleeper := newTestClient(t, f.baseURL(), nil)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()

		_, err := c.Chat(ctx, Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
		if got := CodeOf(err); got != CodeTimeout {
			t.Fatalf("code = %q, want %q (err: %v)", got, CodeTimeout, err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v does not wrap context.DeadlineExceeded", err)
		}
		if got := len(f.requests("/chat/completions")); got != 1 {
			t.Errorf("attempts = %d, want 1", got)
		}
		if got := len(sleeper.recorded()); got != 0 {
			t.Errorf("waits = %d, want 0", got)
		}
	})
}

func TestChatConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, sleeper := newTestClient(t, "http://"+addr+"/v1", nil)

	_, err = c.Chat(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
	if got := CodeOf(err); got != CodeUnavailable {
		t.Fatalf("code = %q, want %q (err: %v)", got, CodeUnavailable, err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("err %v does not wrap ECONNREFUSED", err)
	}
	if got := len(sleeper.recorded()); got != 2 {
		t.Errorf("waits = %d, want 2 (one before each retry)", got)
	}
}

func TestChatRetryAfterPastDeadline(t *testing.T) {
	r := apiError(429, nil, "requests", "Rate limit reached")
	r.header = map[string]string{"Retry-After": "30"}
	f := newFakeServer(t, map[string][]reply{"/chat/completions": {r, textOK(t, "too late")}})
	c, sleeper := newTestClient(t, f.baseURL(), func(c *ClientConfig) { c.MaxBackoff = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	_, err := c.Chat(ctx, Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeRateLimit {
		t.Fatalf("err = %v, want a %q *Error", err, CodeRateLimit)
	}
	if e.RetryAfter != 30*time.Second {
		t.Errorf("RetryAfter = %v, want 30s", e.RetryAfter)
	}
	if got := len(sleeper.recorded()); got != 0 {
		t.Errorf("waits = %d, want 0: the wait would outlast the deadline", got)
	}
	if got := len(f.requests("/chat/completions")); got != 1 {
		t.Errorf("attempts = %d, want 1", got)
	}
}

// Cancelling the ctx interrupts the real wait for a long Retry-After.
func TestChatCancelDuringRetryAfter(t *testing.T) {
	r := apiError(429, nil, "requests", "Rate limit reached")
	r.header = map[string]string{"Retry-After": "3600"}
	f := newFakeServer(t, map[string][]reply{"/chat/completions": {r}})
	c, _ := newTestClient(t, f.baseURL(), func(c *ClientConfig) { c.MaxBackoff = 2 * time.Hour })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make(chan time.Duration, 1)
	c.sleep = func(ctx context.Context, d time.Duration) error {
		waiting <- d
		return sleepCtx(ctx, d)
	}
	go func() {
		<-waiting
		cancel()
	}()

	done := make(chan error, 1)
	go func() {
		_, err := c.Chat(ctx, Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Chat did not return after its ctx was cancelled")
	}
	if got := CodeOf(err); got != CodeRateLimit {
		t.Errorf("code = %q, want %q (err: %v)", got, CodeRateLimit, err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v does not wrap context.Canceled", err)
	}
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) {
		t.Errorf("err %v does not wrap the *openai.APIError", err)
	}
	if got := len(f.requests("/chat/completions")); got != 1 {
		t.Errorf("attempts = %d, want 1", got)
	}
}

// Concurrent calls each honour their own response's Retry-After: the
// headers recorded for one request never leak into another.
func TestChatConcurrentRetryAfter(t *testing.T) {
	type npcKey struct{}
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	dynamic := reply{fn: func(body []byte) reply {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		json.Unmarshal(body, &req)
		who := req.Messages[0].Content
		mu.Lock()
		first := !seen[who]
		seen[who] = true
		mu.Unlock()
		if first {
			var n int
			fmt.Sscanf(who, "npc-%d", &n)
			r := apiError(429, nil, "requests", "slow down")
			r.header = map[string]string{"Retry-After": fmt.Sprint(n + 1)}
			return r
		}
		return textOK(t, "hello "+who)
	}}
	f := newFakeServer(t, map[string][]reply{"/chat/completions": {dynamic}})
	c, _ := newTestClient(t, f.baseURL(), nil)
	var (
		wmu   sync.Mutex
		waits = map[int][]time.Duration{}
	)
	c.sleep = func(ctx context.Context, d time.Duration) error {
		n := ctx.Value(npcKey{}).(int)
		wmu.Lock()
		waits[n] = append(waits[n], d)
		wmu.Unlock()
		return nil
	}

	const n = 8
	var wg sync.WaitGroup
	got := make([]string, n)
	for i := range n {
		wg.Go(func() {
			ctx := context.WithValue(context.Background(), npcKey{}, i)
			resp, err := c.Chat(ctx, Request{Messages: []Message{{Role: RoleUser, Content: fmt.Sprintf("npc-%d", i)}}})
			if err != nil {
				t.Errorf("npc-%d: %v", i, err)
				return
			}
			got[i] = resp.Message.Content
		})
	}
	wg.Wait()
	for i := range n {
		if want := fmt.Sprintf("hello npc-%d", i); got[i] != want {
			t.Errorf("npc-%d got %q, want %q", i, got[i], want)
		}
		if diff := cmp.Diff([]time.Duration{time.Duration(i+1) * time.Second}, waits[i]); diff != "" {
			t.Errorf("npc-%d waits mismatch (-want +got):\n%s", i, diff)
		}
	}
}

// embeddingsReply answers an embeddings request with one vector per input,
// [k] for the input "text-k", listed in reverse order with correct indices.
func embeddingsReply(t *testing.T) reply {
	return reply{fn: func(body []byte) reply {
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("decode embeddings request: %v", err)
		}
		data := make([]map[string]any, 0, len(req.Input))
		for i := len(req.Input) - 1; i >= 0; i-- {
			var k int
			fmt.Sscanf(req.Input[i], "text-%d", &k)
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": []float32{float32(k)}})
		}
		return reply{body: mustJSON(t, map[string]any{"object": "list", "data": data, "model": req.Model})}
	}}
}

func TestEmbed(t *testing.T) {
	texts := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("text-%d", i)
		}
		return out
	}
	tests := []struct {
		name       string
		replies    func(t *testing.T) []reply
		edit       func(*ClientConfig)
		n          int
		wantModel  string
		wantBatchs []int
		wantCode   Code
	}{
		{name: "empty input sends nothing", n: 0, replies: func(t *testing.T) []reply { return []reply{embeddingsReply(t)} }},
		{
			name: "one batch in input order", n: 3, wantModel: DefaultEmbeddingModel, wantBatchs: []int{3},
			replies: func(t *testing.T) []reply { return []reply{embeddingsReply(t)} },
		},
		{
			name: "300 texts in two batches", n: 300, wantModel: DefaultEmbeddingModel, wantBatchs: []int{256, 44},
			replies: func(t *testing.T) []reply { return []reply{embeddingsReply(t)} },
		},
		{
			name: "configured model", n: 2, wantModel: "nomic-embed-text", wantBatchs: []int{2},
			edit:    func(c *ClientConfig) { c.EmbeddingModel = "nomic-embed-text" },
			replies: func(t *testing.T) []reply { return []reply{embeddingsReply(t)} },
		},
		{
			name: "500 is retried", n: 2, wantModel: DefaultEmbeddingModel, wantBatchs: []int{2, 2},
			replies: func(t *testing.T) []reply {
				return []reply{apiError(500, nil, "server_error", "oops"), embeddingsReply(t)}
			},
		},
		{
			name: "wrong vector count", n: 2, wantModel: DefaultEmbeddingModel, wantBatchs: []int{2}, wantCode: CodeBadResponse,
			replies: func(*testing.T) []reply {
				return []reply{{body: `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1]}]}`}}
			},
		},
		{
			name: "repeated index", n: 2, wantModel: DefaultEmbeddingModel, wantBatchs: []int{2}, wantCode: CodeBadResponse,
			replies: func(*testing.T) []reply {
				return []reply{{body: `{"object":"list","data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}`}}
			},
		},
		{
			name: "401", n: 2, wantModel: DefaultEmbeddingModel, wantBatchs: []int{2}, wantCode: CodeAuth,
			replies: func(*testing.T) []reply {
				return []reply{apiError(401, "invalid_api_key", "invalid_request_error", "bad key")}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, map[string][]reply{"/embeddings": tt.replies(t)})
			c, _ := newTestClient(t, f.baseURL(), tt.edit)
			in := texts(tt.n)

			got, err := c.Embed(context.Background(), in)
			if code := CodeOf(err); code != tt.wantCode || (err != nil && code == "") {
				t.Fatalf("Embed error = %v (code %q), want code %q", err, code, tt.wantCode)
			}
			var batches []int
			for _, r := range f.requests("/embeddings") {
				var body struct {
					Input []string `json:"input"`
					Model string   `json:"model"`
				}
				if err := json.Unmarshal(r.body, &body); err != nil {
					t.Fatalf("decode request: %v", err)
				}
				if body.Model != tt.wantModel {
					t.Errorf("model = %q, want %q", body.Model, tt.wantModel)
				}
				batches = append(batches, len(body.Input))
			}
			if diff := cmp.Diff(tt.wantBatchs, batches); diff != "" {
				t.Errorf("batch sizes mismatch (-want +got):\n%s", diff)
			}
			if tt.wantCode != "" {
				return
			}
			var want [][]float32
			for i := range in {
				want = append(want, []float32{float32(i)})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("vectors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewClientValidation(t *testing.T) {
	valid := ClientConfig{BaseURL: "http://localhost:11434/v1", Model: "llama3.1"}
	tests := []struct {
		name    string
		edit    func(*ClientConfig)
		wantErr string // a substring naming the field
	}{
		{name: "missing BaseURL", edit: func(c *ClientConfig) { c.BaseURL = "" }, wantErr: "BaseURL"},
		{name: "relative BaseURL", edit: func(c *ClientConfig) { c.BaseURL = "localhost:11434/v1" }, wantErr: "BaseURL"},
		{name: "unsupported scheme", edit: func(c *ClientConfig) { c.BaseURL = "ftp://example.com/v1" }, wantErr: "BaseURL"},
		{name: "missing Model", edit: func(c *ClientConfig) { c.Model = "" }, wantErr: "Model"},
		{name: "negative Timeout", edit: func(c *ClientConfig) { c.Timeout = -time.Second }, wantErr: "Timeout"},
		{name: "negative MinBackoff", edit: func(c *ClientConfig) { c.MinBackoff = -time.Second }, wantErr: "MinBackoff"},
		{name: "negative MaxBackoff", edit: func(c *ClientConfig) { c.MaxBackoff = -time.Second }, wantErr: "MaxBackoff"},
		{name: "MinBackoff above MaxBackoff", edit: func(c *ClientConfig) { c.MinBackoff, c.MaxBackoff = 2*time.Second, time.Second }, wantErr: "MinBackoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.edit(&cfg)
			_, err := NewClient(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewClient error = %v, want one naming %s", err, tt.wantErr)
			}
		})
	}
}

func TestNewClientDefaults(t *testing.T) {
	type settings struct {
		EmbedModel string
		MaxRetries int
		MinBackoff time.Duration
		MaxBackoff time.Duration
	}
	tests := []struct {
		name string
		cfg  ClientConfig
		want settings
	}{
		{
			name: "zero fields take defaults",
			cfg:  ClientConfig{BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini"},
			want: settings{DefaultEmbeddingModel, DefaultMaxRetries, DefaultMinBackoff, DefaultMaxBackoff},
		},
		{
			name: "negative MaxRetries means none",
			cfg: ClientConfig{BaseURL: "http://localhost:8080/v1", Model: "m", MaxRetries: -1, EmbeddingModel: "e",
				MinBackoff: time.Millisecond, MaxBackoff: time.Second},
			want: settings{"e", 0, time.Millisecond, time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(tt.cfg)
			if err != nil {
				t.Fatalf("NewClient: %v", err)
			}
			got := settings{c.embedModel, c.maxRetries, c.minBackoff, c.maxBackoff}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("settings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHTTPClientTimeout(t *testing.T) {
	tests := []struct {
		name string
		cfg  ClientConfig
		want time.Duration
	}{
		{name: "default", cfg: ClientConfig{}, want: DefaultTimeout},
		{name: "explicit", cfg: ClientConfig{Timeout: time.Second}, want: time.Second},
		{name: "caller's client keeps its timeout", cfg: ClientConfig{HTTPClient: &http.Client{Timeout: 7 * time.Second}}, want: 7 * time.Second},
		{name: "explicit overrides caller's client", cfg: ClientConfig{Timeout: time.Second, HTTPClient: &http.Client{Timeout: 7 * time.Second}}, want: time.Second},
		{name: "caller's client without timeout gets the default", cfg: ClientConfig{HTTPClient: &http.Client{}}, want: DefaultTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before time.Duration
			if tt.cfg.HTTPClient != nil {
				before = tt.cfg.HTTPClient.Timeout
			}
			hc := httpClient(tt.cfg)
			if hc.Timeout != tt.want {
				t.Errorf("Timeout = %v, want %v", hc.Timeout, tt.want)
			}
			if tt.cfg.HTTPClient != nil {
				if hc == tt.cfg.HTTPClient {
					t.Error("the caller's *http.Client was used, not a copy")
				}
				if tt.cfg.HTTPClient.Timeout != before {
					t.Errorf("caller's client Timeout changed to %v", tt.cfg.HTTPClient.Timeout)
				}
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"1", time.Second},
		{" 120 ", 2 * time.Minute},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := parseRetryAfter(tt.in, now); got != tt.want {
				t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// The client sends a copy of a request's messages and keeps nothing of
// them: the tick may build its next prompt in the same array.
var _ MessagesBorrower = (*Client)(nil)
