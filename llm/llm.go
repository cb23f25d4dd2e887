package llm

import (
	"context"
	"encoding/json"
)

// Roles of chat messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Task tells a provider what a request is for. Remote providers ignore it; the
// builtin provider uses it to choose how to answer deterministically.
type Task string

// Tasks npcd sends to models.
const (
	TaskTick      Task = "tick"      // an NPC turn: answer with tool calls
	TaskSummarize Task = "summarize" // a [CONTEXT SUMMARY] of a transcript
	TaskExtract   Task = "extract"   // durable facts as JSON
	TaskReflect   Task = "reflect"   // a higher-level reflection on recent entries
)

// Message is one chat message.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a model's request to run a tool. Arguments is the raw JSON text
// the model produced; it is untrusted and may be malformed.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool describes a function the model may call. Parameters is a JSON Schema.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Request is one chat completion request.
type Request struct {
	Task      Task
	Model     string // empty: the provider's default
	Messages  []Message
	Tools     []Tool
	MaxTokens int // 0: provider default
	// JSONSchema, when set, asks for a JSON answer matching this schema
	// (structured output). Providers that cannot enforce it still get the
	// instruction in the prompt; callers validate the answer themselves.
	JSONSchema json.RawMessage
	// SchemaName names JSONSchema for providers that require a name.
	SchemaName string
	// MessageTokens, when positive, is what Counter.Messages gives for
	// Messages in the encoding MessageEncoding, passed by a caller that
	// counted them already: a model that reports a prompt's usage by
	// counting it in that encoding (the builtin model) takes it instead of
	// counting again. Other models ignore both.
	MessageTokens   int
	MessageEncoding string
}

// Usage counts tokens of one call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Response is a model's answer.
type Response struct {
	Message      Message
	Usage        Usage
	FinishReason string
}

// Chatter runs chat completions. Implementations are safe for concurrent use.
type Chatter interface {
	Chat(ctx context.Context, req Request) (Response, error)
}

// MessagesBorrower is a Chatter that reads a request's Messages only while
// Chat runs and keeps no part of that slice once it returns (the strings
// in it it may keep): its caller may then build the next request's
// Messages in the same array. Any other Chatter may keep the slice, whose
// elements must then never change.
type MessagesBorrower interface {
	Chatter
	// BorrowsMessages marks the contract; it does nothing.
	BorrowsMessages()
}

// Router is the one place that says, for a model name, who answers it and
// how its tokens are counted.
type Router struct {
	// Remote answers every model but BuiltinModel; nil when no endpoint is
	// configured, in which case Builtin answers every model.
	Remote Chatter
	// Builtin is the offline model.
	Builtin Chatter
}

// Model returns who answers requests for model: the builtin model when the
// model is BuiltinModel or no remote provider is configured, the remote one
// otherwise.
func (r Router) Model(model string) Chatter {
	if r.builtinAnswers(model) {
		return r.Builtin
	}
	return r.Remote
}

// builtinAnswers reports whether the builtin model answers model.
func (r Router) builtinAnswers(model string) bool { return model == BuiltinModel || r.Remote == nil }

// PromptCounter is a model that reports a request's prompt tokens by
// counting its messages with a Counter, as the builtin model does: it takes
// the count a caller made with that counter (Request.MessageTokens) instead
// of counting again. A remote provider, which reports its own usage, is
// none.
type PromptCounter interface {
	PromptCounter() *Counter
}

// UsageCounter returns the counter a caller counts a request for model
// with to pass the count along (Request.MessageTokens): that of the model
// answering it when that model counts (PromptCounter), as the builtin model
// does; nil otherwise, when a remote provider reports its own and a count
// would go unused.
func (r Router) UsageCounter(model string) *Counter {
	if pc, ok := r.Model(model).(PromptCounter); ok {
		return pc.PromptCounter()
	}
	return nil
}

// Counter returns the token counter of model (see NewCounter).
func (r Router) Counter(model string) *Counter { return NewCounter(model) }

// For returns both who answers model and its token counter.
func (r Router) For(model string) (Chatter, *Counter) { return r.Model(model), r.Counter(model) }

// Embedder turns texts into vectors, one per text, in order. Implementations
// are safe for concurrent use.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}
