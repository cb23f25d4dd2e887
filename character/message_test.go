package character_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

func TestMessagePromptAndFull(t *testing.T) {
	big := strings.Repeat("a long line of observation text. ", 300)
	call := store.NewJSON([]character.ToolCall{{ID: "c1", Name: "say", Args: `{"text":"hi"}`}})
	wantCalls := []llm.ToolCall{{ID: "c1", Name: "say", Arguments: `{"text":"hi"}`}}
	tests := []struct {
		name       string
		m          character.Message
		wantPrompt llm.Message
	}{
		{
			name:       "assistant with a call",
			m:          character.Message{ID: 4, Role: llm.RoleAssistant, Content: "thinking", ToolCalls: call},
			wantPrompt: llm.Message{Role: llm.RoleAssistant, Content: "thinking", ToolCalls: wantCalls},
		},
		{
			name:       "user with a name",
			m:          character.Message{ID: 5, Role: llm.RoleUser, Name: "alice", Content: "[10:00] alice says: \"hi\""},
			wantPrompt: llm.Message{Role: llm.RoleUser, Name: "alice", Content: "[10:00] alice says: \"hi\""},
		},
		{
			name:       "tool result",
			m:          character.Message{ID: 6, Role: llm.RoleTool, ToolCallID: "c1", ToolName: "look", Content: "a forge"},
			wantPrompt: llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Content: "a forge"},
		},
		{
			name: "masked tool result",
			m:    character.Message{ID: 7, Role: llm.RoleTool, ToolCallID: "c2", ToolName: "look", Content: "a forge", Tokens: 42, Masked: true},
			wantPrompt: llm.Message{Role: llm.RoleTool, ToolCallID: "c2",
				Content: "[observation masked: look result, 42 tokens; recall_archive with id 7 reads it again]"},
		},
		{
			name:       "offloaded tool result",
			m:          character.Message{ID: 8, Role: llm.RoleTool, ToolCallID: "c3", ToolName: "look", Content: big, Offloaded: true},
			wantPrompt: llm.Message{Role: llm.RoleTool, ToolCallID: "c3", Content: character.OffloadView(8, big)},
		},
		{
			// Masking wins over offload: the whole result is hidden.
			name:       "masked and offloaded",
			m:          character.Message{ID: 9, Role: llm.RoleTool, ToolName: "look", Content: big, Tokens: 900, Offloaded: true, Masked: true},
			wantPrompt: llm.Message{Role: llm.RoleTool, Content: character.MaskPlaceholder(9, "look", 900)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.wantPrompt, tt.m.Prompt()); diff != "" {
				t.Errorf("Prompt() (-want +got):\n%s", diff)
			}
			full := tt.m.Full()
			if full.Content != tt.m.Content {
				t.Errorf("Full().Content = %q, want the stored content", clipForLog(full.Content))
			}
			wantFull := tt.wantPrompt
			wantFull.Content = tt.m.Content
			if diff := cmp.Diff(wantFull, full); diff != "" {
				t.Errorf("Full() (-want +got):\n%s", diff)
			}
		})
	}
}

func clipForLog(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func TestPromptTokens(t *testing.T) {
	m := character.Message{Tokens: 100, ViewTokens: 60, MaskTokens: 20}
	if got := m.PromptTokens(); got != 60 {
		t.Errorf("unmasked PromptTokens = %d, want the view's 60", got)
	}
	m.Masked = true
	if got := m.PromptTokens(); got != 20 {
		t.Errorf("masked PromptTokens = %d, want the placeholder's 20", got)
	}
}

func TestMaskPlaceholder(t *testing.T) {
	got := character.MaskPlaceholder(12, "", 7)
	for _, want := range []string{"tool result", "7 tokens", "recall_archive with id 12 reads it again"} {
		if !strings.Contains(got, want) {
			t.Errorf("MaskPlaceholder(12, \"\", 7) = %q, want it to contain %q", got, want)
		}
	}
}

func TestOffloadView(t *testing.T) {
	tests := []struct {
		name    string
		content string
	}{
		{"ascii", strings.Repeat("0123456789", 500)},
		{"two-byte runes", strings.Repeat("é", 3000)},
		{"three-byte runes", strings.Repeat("漢", 2000)},
		{"four-byte runes", strings.Repeat("🗡", 2000)},
		{"mixed", strings.Repeat("a🗡é漢", 900)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := character.OffloadView(31, tt.content)
			if !utf8.ValidString(got) {
				t.Fatalf("OffloadView produced invalid UTF-8")
			}
			if len(got) >= len(tt.content) {
				t.Errorf("OffloadView is %d bytes, not shorter than the %d-byte content", len(got), len(tt.content))
			}
			if !strings.Contains(got, "stored as message 31") || !strings.Contains(got, "recall_archive with id 31") {
				t.Errorf("OffloadView does not name the message id: %q", clipForLog(got))
			}
			head, rest, ok := strings.Cut(got, "\n…[")
			if !ok {
				t.Fatalf("no omission marker in %q", clipForLog(got))
			}
			_, tail, ok := strings.Cut(rest, "]…\n")
			if !ok {
				t.Fatalf("no end of the omission marker")
			}
			if !strings.HasPrefix(tt.content, head) || len(head) < 2000 || len(head) > 2048 {
				t.Errorf("head is %d bytes and a prefix: %v; want up to 2048 bytes of the start", len(head), strings.HasPrefix(tt.content, head))
			}
			if !strings.HasSuffix(tt.content, tail) || len(tail) < 1000 || len(tail) > 1024 {
				t.Errorf("tail is %d bytes and a suffix: %v; want up to 1024 bytes of the end", len(tail), strings.HasSuffix(tt.content, tail))
			}
			omitted := len(tt.content) - len(head) - len(tail)
			if !strings.Contains(rest, fmt.Sprintf("%d bytes omitted", omitted)) {
				t.Errorf("marker %q does not say %d bytes were omitted", rest[:60], omitted)
			}
		})
	}
	short := strings.Repeat("x", 3072)
	if got := character.OffloadView(1, short); got != short {
		t.Errorf("OffloadView changed a result that fits head and tail")
	}
}

// fixedCounter charges one token per byte of content plus 3 per message, so
// expected costs can be worked out by hand.
type fixedCounter struct{}

func (fixedCounter) Message(m llm.Message) int { return 3 + len(m.Content) }

func TestMeasure(t *testing.T) {
	big := strings.Repeat("b", 5000)
	tests := []struct {
		name          string
		m             character.Message
		offload       int
		wantTokens    int
		wantView      int
		wantMask      int
		wantOffloaded bool
	}{
		{
			name:       "assistant",
			m:          character.Message{ID: 3, Role: llm.RoleAssistant, Content: "hello"},
			offload:    512,
			wantTokens: 8, wantView: 8, wantMask: 8,
		},
		{
			name:       "small tool result",
			m:          character.Message{ID: 3, Role: llm.RoleTool, ToolName: "look", Content: "ok"},
			offload:    512,
			wantTokens: 5, wantView: 5, wantMask: 3 + len(character.MaskPlaceholder(3, "look", 5)),
		},
		{
			name:       "large tool result",
			m:          character.Message{ID: 3, Role: llm.RoleTool, ToolName: "look", Content: big},
			offload:    4096,
			wantTokens: 5003, wantView: 3 + len(character.OffloadView(3, big)), wantMask: 3 + len(character.MaskPlaceholder(3, "look", 5003)),
			wantOffloaded: true,
		},
		{
			name:       "offload disabled",
			m:          character.Message{ID: 3, Role: llm.RoleTool, ToolName: "look", Content: big},
			offload:    0,
			wantTokens: 5003, wantView: 5003, wantMask: 3 + len(character.MaskPlaceholder(3, "look", 5003)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.m
			character.Measure(&m, fixedCounter{}, tt.offload)
			got := [4]any{m.Tokens, m.ViewTokens, m.MaskTokens, m.Offloaded}
			want := [4]any{tt.wantTokens, tt.wantView, tt.wantMask, tt.wantOffloaded}
			if got != want {
				t.Errorf("tokens, view, mask, offloaded = %v, want %v", got, want)
			}
			if m.Content != tt.m.Content {
				t.Errorf("Measure changed the content")
			}
		})
	}
}

func TestToolCallArgsJSON(t *testing.T) {
	tests := []struct {
		args string
		want string
	}{
		{`{"text":"hi"}`, `{"text":"hi"}`},
		{`[1,2]`, `[1,2]`},
		{` {"a": 1} `, ` {"a": 1} `},
		{`{"text":"hi"`, `"{\"text\":\"hi\""`},
		{`not json`, `"not json"`},
		{``, `""`},
		{`   `, `"   "`},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			got := character.ToolCall{Args: tt.args}.ArgsJSON()
			if string(got) != tt.want {
				t.Errorf("ArgsJSON(%q) = %s, want %s", tt.args, got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("ArgsJSON(%q) = %s is not valid JSON", tt.args, got)
			}
		})
	}
}

func TestToolCallText(t *testing.T) {
	for args, want := range map[string]string{
		`{"text":"  Aye. "}`:     "Aye.",
		`{"item":"sword"}`:       "",
		`{"text": "unterminated`: "",
		``:                       "",
	} {
		if got := (character.ToolCall{Args: args}).Text(); got != want {
			t.Errorf("Text of %q = %q, want %q", args, got, want)
		}
	}
}

func TestMeasureOffloadsOnlyWhenTheViewIsShorter(t *testing.T) {
	counter := llm.NewCounter("builtin")
	mid := &character.Message{ID: 7, Role: llm.RoleTool, ToolName: "look", Content: strings.Repeat("a cold forge ", 160)} // ~2 KB
	character.Measure(mid, counter, 512)
	if mid.Offloaded || mid.ViewTokens != mid.Tokens {
		t.Errorf("a 2 KB result under a 512-byte limit: offloaded %v, view %d of %d tokens; head and tail would be the whole text", mid.Offloaded, mid.ViewTokens, mid.Tokens)
	}
	big := &character.Message{ID: 8, Role: llm.RoleTool, ToolName: "look", Content: strings.Repeat("a cold forge ", 800)} // ~10 KB
	character.Measure(big, counter, 512)
	if !big.Offloaded || big.ViewTokens >= big.Tokens {
		t.Errorf("a 10 KB result: offloaded %v, view %d of %d tokens", big.Offloaded, big.ViewTokens, big.Tokens)
	}
}
