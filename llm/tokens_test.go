package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/npcd/npcd/internal/gencache"
)

func TestNewCounterEncoding(t *testing.T) {
	tests := []struct {
		model, want string
	}{
		{"gpt-4o", "o200k_base"},
		{"gpt-4o-mini", "o200k_base"},
		{"GPT-4o-2024-08-06", "o200k_base"},
		{"chatgpt-4o-latest", "o200k_base"},
		{"gpt-4.1", "o200k_base"},
		{"gpt-4.1-nano", "o200k_base"},
		{"gpt-5", "o200k_base"},
		{"gpt-5-mini", "o200k_base"},
		{"o1", "o200k_base"},
		{"o3", "o200k_base"},
		{"o3-mini", "o200k_base"},
		{"o4-mini", "o200k_base"},
		{"openai/gpt-4o", "o200k_base"},
		{"openrouter/openai/gpt-4.1", "o200k_base"},
		{"gpt-4", "cl100k_base"},
		{"gpt-4-turbo", "cl100k_base"},
		{"gpt-3.5-turbo", "cl100k_base"},
		{"llama3.1:8b", "cl100k_base"},
		{"meta-llama/Llama-3.1-8B-Instruct", "cl100k_base"},
		{"qwen2.5", "cl100k_base"},
		{BuiltinModel, "cl100k_base"},
		{"", "cl100k_base"},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			if got := NewCounter(tt.model).Encoding(); got != tt.want {
				t.Errorf("NewCounter(%q).Encoding() = %q, want %q", tt.model, got, tt.want)
			}
		})
	}
}

func TestCounterText(t *testing.T) {
	for _, model := range []string{"gpt-4o", BuiltinModel} {
		c := NewCounter(model)
		if got := c.Text(""); got != 0 {
			t.Errorf("%s: Text(\"\") = %d, want 0", model, got)
		}
		if got := c.Text("hello world"); got != 2 {
			t.Errorf("%s: Text(\"hello world\") = %d, want 2", model, got)
		}
		short, long := c.Text("sword"), c.Text(strings.Repeat("the sword at the forge ", 50))
		if short < 1 || long <= short*50 {
			t.Errorf("%s: Text grows badly: %d for one word, %d for 250", model, short, long)
		}
		// Invalid UTF-8 is counted, not refused.
		if got := c.Text("\xff\xfe broken"); got <= 0 {
			t.Errorf("%s: Text of invalid UTF-8 = %d", model, got)
		}
	}
	// The two encodings really differ: o200k packs this text tighter.
	text := strings.Repeat("Привет, кузнец! Где мой меч? ", 20)
	if o, cl := NewCounter("gpt-4o").Text(text), NewCounter("gpt-4").Text(text); o >= cl {
		t.Errorf("o200k %d tokens, cl100k %d: want o200k smaller on Cyrillic", o, cl)
	}
}

func TestCounterMessage(t *testing.T) {
	c := NewCounter(BuiltinModel)
	plain := Message{Role: RoleUser, Content: "I lost my sword at the forge."}
	base := tokensPerMessage + c.Text(RoleUser) + c.Text(plain.Content)
	tests := []struct {
		name string
		m    Message
		want int
	}{
		{"empty content is framing and role", Message{Role: RoleAssistant}, tokensPerMessage + c.Text(RoleAssistant)},
		{"content", plain, base},
		{"name", Message{Role: RoleUser, Content: plain.Content, Name: "alice"}, base + tokensPerName + c.Text("alice")},
		{"tool result id", Message{Role: RoleTool, Content: "ok", ToolCallID: "call_1"},
			tokensPerMessage + c.Text(RoleTool) + c.Text("ok") + c.Text("call_1")},
		{"tool calls", Message{Role: RoleAssistant, ToolCalls: []ToolCall{
			{ID: "c1", Name: "say", Arguments: `{"text":"Welcome!"}`},
			{ID: "c2", Name: "emote", Arguments: `{"text":"nods"}`},
		}}, tokensPerMessage + c.Text(RoleAssistant) +
			tokensPerToolCall + c.Text("say") + c.Text(`{"text":"Welcome!"}`) +
			tokensPerToolCall + c.Text("emote") + c.Text(`{"text":"nods"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.Message(tt.m); got != tt.want {
				t.Errorf("Message = %d, want %d", got, tt.want)
			}
		})
	}

	without := Message{Role: RoleAssistant, Content: "Welcome!"}
	with := without
	with.ToolCalls = []ToolCall{{ID: "c1", Name: "say", Arguments: `{"text":"Welcome!"}`}}
	if c.Message(with) <= c.Message(without) {
		t.Errorf("a message with a tool call costs %d, no more than one without (%d)", c.Message(with), c.Message(without))
	}
	named := plain
	named.Name = "alice"
	if c.Message(named) <= c.Message(plain) {
		t.Errorf("a named message costs %d, no more than one without a name (%d)", c.Message(named), c.Message(plain))
	}
}

func TestCounterMessages(t *testing.T) {
	c := NewCounter("gpt-4o")
	ms := []Message{
		{Role: RoleSystem, Content: "You are Brom."},
		{Role: RoleUser, Content: "hello"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "say", Arguments: `{"text":"hi"}`}}},
	}
	want := ReplyPriming
	for _, m := range ms {
		want += c.Message(m)
	}
	if got := c.Messages(ms); got != want {
		t.Errorf("Messages = %d, want %d (each message plus reply priming)", got, want)
	}
	if got := c.Messages(nil); got != ReplyPriming {
		t.Errorf("Messages(nil) = %d, want the reply priming %d", got, ReplyPriming)
	}
}

func TestCounterTools(t *testing.T) {
	c := NewCounter(BuiltinModel)
	if got := c.Tools(nil); got != 0 {
		t.Errorf("Tools(nil) = %d, want 0", got)
	}
	defs := []Tool{
		{Name: "say", Description: "Say something aloud.", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		{Name: "look"},
		{Name: "journal_write", Description: "Write a note.", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	prev := 0
	for i := range defs {
		got := c.Tools(defs[:i+1])
		if got <= prev {
			t.Errorf("Tools of %d definitions = %d, not more than of %d (%d)", i+1, got, i, prev)
		}
		prev = got
	}
	want := tokensToolsHeader
	for _, d := range defs {
		want += tokensPerTool + c.Text(d.Name) + c.Text(d.Description) + c.Text(string(d.Parameters))
	}
	if prev != want {
		t.Errorf("Tools = %d, want %d", prev, want)
	}
}

func TestCounterIsSafeForConcurrentUse(t *testing.T) {
	c := NewCounter("gpt-4o")
	text := strings.Repeat("The forge is hot. ", 40)
	want := c.Text(text)
	var wg sync.WaitGroup
	errs := make(chan int, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if got := c.Text(text); got != want {
					errs <- got
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for got := range errs {
		t.Errorf("concurrent Text = %d, want %d", got, want)
	}
}

func TestRouter(t *testing.T) {
	builtin, remote := NewBuiltin(), &Client{}
	for _, tc := range []struct {
		model  string
		remote Chatter
		want   Chatter
	}{
		{BuiltinModel, remote, builtin},
		{"gpt-4o-mini", remote, remote},
		{"gpt-4o-mini", nil, builtin},
	} {
		r := Router{Remote: tc.remote, Builtin: builtin}
		got, counter := r.For(tc.model)
		if got != tc.want {
			t.Errorf("Router.For(%q), remote set %v = %T, want %T", tc.model, tc.remote != nil, got, tc.want)
		}
		if counter != NewCounter(tc.model) {
			t.Errorf("Router.For(%q) gave a counter other than the shared one of its encoding", tc.model)
		}
		// A request is counted for its usage only when the builtin model,
		// which counts, answers it, and in the builtin model's encoding.
		want := NewCounter(BuiltinModel)
		if tc.want != builtin {
			want = nil
		}
		if got := r.UsageCounter(tc.model); got != want {
			t.Errorf("Router.UsageCounter(%q), remote set %v = %v, want %v", tc.model, tc.remote != nil, got, want)
		}
	}
	// A remote model that counts its prompts as the builtin model does
	// is passed the count too, made with its own counter.
	counting := countingRemote{NewCounter("gpt-4o")}
	if got := (Router{Remote: counting, Builtin: builtin}).UsageCounter("gpt-4o"); got != counting.c {
		t.Errorf("Router.UsageCounter of a remote model that counts = %v, want its counter", got)
	}
}

// countingRemote is a remote model that reports usage by counting with c.
type countingRemote struct{ c *Counter }

func (countingRemote) Chat(context.Context, Request) (Response, error) { return Response{}, nil }
func (r countingRemote) PromptCounter() *Counter                       { return r.c }

// A prompt repeats its roles, names, call ids and arguments every tick:
// counting a message already counted must not tokenize it again.
func TestCounterMessageCountedOnce(t *testing.T) {
	c := NewCounter(BuiltinModel)
	m := Message{Role: RoleAssistant, Name: "brom", Content: "Aye.", ToolCalls: []ToolCall{{ID: "c1", Name: "say", Arguments: `{"text":"Aye."}`}}}
	want := c.Message(m)
	if allocs := testing.AllocsPerRun(50, func() {
		if got := c.Message(m); got != want {
			t.Fatalf("count changed from %d to %d", want, got)
		}
	}); allocs != 0 && !raceEnabled {
		t.Fatalf("counting a message again allocates %.0f times: it was tokenized again", allocs)
	}
}

// TestTextByLinesIsExact checks that counting a text line by line, as Text
// does, gives what the tokenizer gives for the whole text, on random texts
// mixing words, digits, punctuation, spaces and line breaks of every kind.
func TestTextByLinesIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	atoms := []string{"a", "word", "Brom", "é", "ß", "日本", "42", "1234567", " ", "  ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ",
		".", "...", ",", "'s", "'ll", "/", "//", "-", "[", "]", "(", ")", "*", "#", "\"", ":", "<|endoftext|>", "🙂", "\u00a0"}
	for _, model := range []string{BuiltinModel, "gpt-4o"} {
		c := NewCounter(model)
		for i := 0; i < 3000; i++ {
			var b strings.Builder
			for n := rng.IntN(60); n > 0; n-- {
				b.WriteString(atoms[rng.IntN(len(atoms))])
			}
			s := b.String()
			want, err := c.codec.Count(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Text(s); got != want {
				t.Fatalf("%s: Text(%q) = %d, the tokenizer counts %d", c.Encoding(), s, got, want)
			}
		}
	}
}

// The counter reads a tool's schema in place: what it caches must be its
// own copy, so a schema changed after counting is counted anew.
func TestCounterToolsKeepsNoSchema(t *testing.T) {
	c := NewCounter(BuiltinModel)
	schema := []byte(`{"type":"object","properties":{"zqxjk_item_7319":{"type":"string"}}}`)
	tools := []Tool{{Name: "give", Parameters: schema}}
	before := c.Tools(tools)
	copy(schema[len(`{"type":"object","properties":{"`):], "a b c d e f g h i j k l")
	after := c.Tools(tools)
	want := tokensToolsHeader + tokensPerTool + c.Text("give") + c.Text(string(schema))
	if after != want || after == before {
		t.Errorf("Tools after the schema changed = %d, want %d (before: %d)", after, want, before)
	}
}

// A text counted again and again stays in the cache however many others
// pass through it, the cache holds at most two generations of texts, and
// every count is the tokenizer's.
func TestCounterKeepsRecurringTexts(t *testing.T) {
	c := newCounter(cl100k())
	c.texts = gencache.New[uint64, int32](16)
	const recurring = "Brom wipes the counter and nods."
	want := c.codecCount(recurring)
	if got := c.Text(recurring); got != want {
		t.Fatalf("first count %d, want %d", got, want)
	}
	for i := range 400 {
		s := fmt.Sprintf("traveler %d asks about the road to Varn", i)
		if got, want := c.Text(s), c.codecCount(s); got != want {
			t.Fatalf("%q: %d tokens, want %d", s, got, want)
		}
		if i%10 == 0 {
			c.mu.RLock()
			_, _, cached := c.texts.Get(textHash(recurring))
			c.mu.RUnlock()
			if !cached {
				t.Fatalf("after %d other texts the recurring one is no longer cached", i+1)
			}
			if got := c.Text(recurring); got != want {
				t.Fatalf("recount %d, want %d", got, want)
			}
		}
		if n, o := c.texts.Len(); n > 16 || o > 16 {
			t.Fatalf("the cache holds %d + %d texts, over two generations of 16", n, o)
		}
	}
	if _, _, cached := c.texts.Get(textHash("traveler 0 asks about the road to Varn")); cached {
		t.Fatal("a text counted once, long ago, is still cached")
	}
}
