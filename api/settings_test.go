package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/scenarios"
)

// The HTTP API and scenario files accept the same forms of tools (bare
// names, objects, defaults named without parameters) and store the same
// declarations for them.
func TestToolFormsMatchScenarioFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	body := `{"name": "Brom", "persona": "You are Brom.", "tools": [
		"say", "look",
		{"name": "emote", "description": "Show a feeling."},
		{"name": "give", "description": "Give an item.", "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}},
		{"name": "check_inventory", "returns": true}
	]}`
	r := e.do("PUT", "/v1/npcs/brom", body)
	if r.status != http.StatusCreated {
		t.Fatalf("PUT with bare tool names = %d %s", r.status, r.body)
	}
	stored, err := e.chars.Get(t.Context(), "brom")
	if err != nil {
		t.Fatal(err)
	}

	sc, err := scenarios.Parse("tools.yaml", []byte(`name: tools
npc:
  id: brom
  name: Brom
  persona: You are Brom.
  tools:
    - say
    - look
    - {name: emote, description: Show a feeling.}
    - name: give
      description: Give an item.
      parameters: {type: object, properties: {item: {type: string}}, required: [item]}
    - {name: check_inventory, returns: true}
steps:
  - expect: [{persona: unchanged}]
`))
	if err != nil {
		t.Fatal(err)
	}
	// Compare as JSON: YAML and JSON decode numbers and lists alike there.
	asJSON := func(v []character.ToolSpec) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if diff := cmp.Diff(asJSON(sc.NPC.Tools.V), asJSON(stored.Tools.V)); diff != "" {
		t.Errorf("tools (-scenario +API):\n%s", diff)
	}
	if got := stored.Tools.V[0]; got.Name != "say" || got.Parameters == nil {
		t.Errorf("bare say = %+v, want the default say with its text parameter", got)
	}
	if got := stored.Tools.V[2]; got.Description != "Show a feeling." || got.Parameters == nil {
		t.Errorf("emote without parameters = %+v, want the default emote with the given description", got)
	}
	if got := stored.Tools.V[1]; got.Name != "look" || got.Parameters != nil {
		t.Errorf("bare look = %+v, want a tool without arguments", got)
	}
}

func TestToolFormErrorsNameTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	for body, field := range map[string]string{
		`{"name": "Brom", "persona": "p", "tools": ["say", 3]}`:                          "tools[1]",
		`{"name": "Brom", "persona": "p", "tools": ["say", {"name": "x", "colour": 1}]}`: "tools[1]",
		`{"name": "Brom", "persona": "p", "tools": [{"name": "x", "returns": "yes"}]}`:   "tools[0].returns",
		`{"name": "Brom", "persona": "p", "tools": ["say", "bad name!"]}`:                "tools[1].name",
	} {
		r := e.do("PUT", "/v1/npcs/brom", body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s = %d, want 400", body, r.status)
			continue
		}
		if got := errorOf(t, r); !strings.HasPrefix(got.Message, field+": ") && !strings.HasPrefix(got.Message, field+" ") {
			t.Errorf("%s: error %q, want it to name %s", body, got.Message, field)
		}
	}
	if r := e.do("GET", "/v1/npcs/brom", ""); r.status != http.StatusNotFound {
		t.Errorf("a refused PUT created the NPC: %d", r.status)
	}
}
