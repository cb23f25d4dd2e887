package character

import (
	"reflect"
	"testing"

	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// A prompt's calls are the stored calls themselves (promptCalls): the two
// types are the same strings in the same places, the values read through
// the prompt are those stored, and appending to the prompt's calls leaves
// the stored ones as they were.
func TestPromptCallsAreTheStoredOnes(t *testing.T) {
	st, pt := reflect.TypeFor[ToolCall](), reflect.TypeFor[llm.ToolCall]()
	if st.Size() != pt.Size() || st.NumField() != pt.NumField() {
		t.Fatalf("ToolCall is %d bytes in %d fields, llm.ToolCall %d in %d", st.Size(), st.NumField(), pt.Size(), pt.NumField())
	}
	for i := range st.NumField() {
		sf, pf := st.Field(i), pt.Field(i)
		if sf.Type != pf.Type || sf.Offset != pf.Offset {
			t.Errorf("field %d: %s %v at %d, llm's %s %v at %d", i, sf.Name, sf.Type, sf.Offset, pf.Name, pf.Type, pf.Offset)
		}
	}
	calls := []ToolCall{{ID: "c1", Name: "say", Args: `{"text":"hi"}`}, {ID: "c2", Name: "look", Args: `{}`}, {ID: "c3", Name: "emote", Args: `{"text":"nods"}`}}
	m := Message{Role: llm.RoleAssistant, ToolCalls: store.NewJSON(append(make([]ToolCall, 0, 6), calls...))}
	got := m.Prompt().ToolCalls
	want := []llm.ToolCall{{ID: "c1", Name: "say", Arguments: `{"text":"hi"}`}, {ID: "c2", Name: "look", Arguments: `{}`}, {ID: "c3", Name: "emote", Arguments: `{"text":"nods"}`}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("prompt calls %+v, want %+v", got, want)
	}
	if cap(got) != len(got) {
		t.Errorf("prompt calls have room to grow (cap %d, len %d): appending would write into the stored array", cap(got), len(got))
	}
	_ = append(got, llm.ToolCall{ID: "c4"})
	if ext := m.ToolCalls.V[:4]; ext[3] != (ToolCall{}) {
		t.Errorf("appending to the prompt's calls wrote %+v into the stored array", ext[3])
	}
	if full := m.Full().ToolCalls; !reflect.DeepEqual(full, want) || cap(full) != len(full) {
		t.Errorf("the full form's calls %+v (cap %d), want %+v without room to grow", full, cap(full), want)
	}
	if m := (Message{Role: llm.RoleAssistant}); m.Prompt().ToolCalls != nil || m.Full().ToolCalls != nil {
		t.Error("a message without calls is prompted with some")
	}
}
