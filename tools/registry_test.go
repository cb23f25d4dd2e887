package tools_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/tools"
)

func internals() []tools.Tool { return tools.NewInternals(nil, nil).Tools() }

func look() character.ToolSpec {
	return character.ToolSpec{Name: "look", Description: "Look around.", Returns: true}
}

func give() character.ToolSpec {
	return character.ToolSpec{Name: "give", Description: "Give an item.", Parameters: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"item":  map[string]any{"type": "string", "minLength": 1},
			"to":    map[string]any{"type": "string"},
			"count": map[string]any{"type": "integer", "minimum": 1},
		},
		"required":             []any{"item", "to"},
		"additionalProperties": false,
	}}
}

func compile(t *testing.T, game ...character.ToolSpec) *tools.Set {
	t.Helper()
	s, err := tools.Compile(game, internals())
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func TestCompileAccepts(t *testing.T) {
	tests := []struct {
		name string
		game []character.ToolSpec
	}{
		{"default tools", character.DefaultTools()},
		{"returns:true tool without parameters", []character.ToolSpec{look()}},
		{"schema with a local $ref", []character.ToolSpec{{Name: "walk", Parameters: map[string]any{
			"type":       "object",
			"$defs":      map[string]any{"dir": map[string]any{"enum": []any{"north", "south"}}},
			"properties": map[string]any{"to": map[string]any{"$ref": "#/$defs/dir"}},
		}}}},
		{"schema naming the 2020-12 meta-schema", []character.ToolSpec{{Name: "wave", Parameters: map[string]any{
			"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
		}}}},
		{"no game tools", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tools.Compile(tt.game, internals())
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			for _, g := range tt.game {
				tool, ok := s.Lookup(g.Name)
				if !ok || tool.Internal || tool.Returns != g.Returns {
					t.Errorf("Lookup(%s) = %+v, %v", g.Name, tool, ok)
				}
				if !json.Valid(tool.Parameters) {
					t.Errorf("%s: parameters %s are not JSON", g.Name, tool.Parameters)
				}
			}
			for _, in := range internals() {
				if tool, ok := s.Lookup(in.Name); !ok || !tool.Internal {
					t.Errorf("internal tool %s missing or not internal", in.Name)
				}
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	withParams := func(p map[string]any) []character.ToolSpec {
		return []character.ToolSpec{look(), {Name: "act", Parameters: p}}
	}
	tests := []struct {
		name      string
		game      []character.ToolSpec
		wantField string
		wantIs    error // besides ErrInvalidSchema
	}{
		{name: "type is a number", game: withParams(map[string]any{"type": 12}), wantField: "tools[1].parameters"},
		{name: "top level is a string", game: withParams(map[string]any{"type": "string"}), wantField: "tools[1].parameters"},
		{name: "top level is an array", game: withParams(map[string]any{"type": "array", "items": map[string]any{}}), wantField: "tools[1].parameters"},
		{name: "nested type is a number", game: withParams(map[string]any{"type": "object",
			"properties": map[string]any{"a": map[string]any{"type": 12}}}), wantField: "tools[1].parameters"},
		{name: "required is not a list", game: withParams(map[string]any{"type": "object", "required": "a"}), wantField: "tools[1].parameters"},
		{name: "file $ref", game: withParams(map[string]any{"type": "object",
			"properties": map[string]any{"a": map[string]any{"$ref": "file:///etc/passwd"}}}), wantField: "tools[1].parameters"},
		{name: "http $ref", game: withParams(map[string]any{"type": "object",
			"properties": map[string]any{"a": map[string]any{"$ref": "http://example.com/x.json"}}}), wantField: "tools[1].parameters"},
		{name: "relative $ref", game: withParams(map[string]any{"type": "object", "$ref": "other.json"}), wantField: "tools[1].parameters"},
		{name: "unknown $schema", game: withParams(map[string]any{"type": "object", "$schema": "http://example.com/meta.json"}), wantField: "tools[1].parameters"},
		{name: "oversized schema", game: withParams(map[string]any{"type": "object", "description": strings.Repeat("x", tools.MaxSchemaBytes)}), wantField: "tools[1].parameters"},
		{name: "not encodable", game: withParams(map[string]any{"type": "object", "bad": func() {}}), wantField: "tools[1].parameters"},
		{name: "named like an internal tool", game: []character.ToolSpec{look(), {Name: tools.JournalWrite}}, wantField: "tools[1].name", wantIs: tools.ErrReserved},
		{name: "named like recall_archive", game: []character.ToolSpec{{Name: tools.RecallArchive}}, wantField: "tools[0].name", wantIs: tools.ErrReserved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tools.Compile(tt.game, internals())
			var se *tools.SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("Compile = %v (%T), want a *SchemaError", err, err)
			}
			if se.Field != tt.wantField {
				t.Errorf("Field = %q, want %q (%v)", se.Field, tt.wantField, err)
			}
			if !errors.Is(err, tools.ErrInvalidSchema) {
				t.Errorf("error %v does not match ErrInvalidSchema", err)
			}
			if tt.wantIs != nil && !errors.Is(se.Err, tt.wantIs) {
				t.Errorf("cause %v does not match %v", se.Err, tt.wantIs)
			}
			if !strings.HasPrefix(err.Error(), tt.wantField+": ") {
				t.Errorf("message %q does not start with the field", err.Error())
			}
		})
	}
}

func TestCompileReadsNoFiles(t *testing.T) {
	// A schema that loaded the file would see its content in the error or
	// be accepted; either way the refusal must name the ref, not its data.
	_, err := tools.Compile([]character.ToolSpec{{Name: "x", Parameters: map[string]any{"$ref": "file:///etc/passwd"}}}, nil)
	if err == nil {
		t.Fatal("Compile accepted an external $ref")
	}
	if strings.Contains(err.Error(), "root:") {
		t.Errorf("the error shows the file was read: %v", err)
	}
	if !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("error %q does not say external refs are refused", err)
	}
}

func TestDefinitionsOrder(t *testing.T) {
	s := compile(t, give(), look(), character.ToolSpec{Name: "say"})
	var got []string
	for _, d := range s.Definitions() {
		got = append(got, d.Name)
	}
	want := []string{"give", "look", "say", tools.JournalWrite, tools.ProfileUpdate, tools.MemorySearch, tools.RecallArchive}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Definitions order (-want +got):\n%s", diff)
	}
	defs := s.Definitions()
	if defs[0].Description != "Give an item." {
		t.Errorf("description = %q", defs[0].Description)
	}
	var params map[string]any
	if err := json.Unmarshal(defs[1].Parameters, &params); err != nil || params["type"] != "object" {
		t.Errorf("a tool declared without parameters is offered %s, %v; want an object schema", defs[1].Parameters, err)
	}
	// Made once: every tick of the NPCs that share the set asks for them.
	if n := testing.AllocsPerRun(10, func() { s.Definitions() }); n != 0 {
		t.Errorf("Definitions allocates %v times a call", n)
	}
	names := s.Names()
	wantNames := []string{"give", tools.JournalWrite, "look", tools.MemorySearch, tools.ProfileUpdate, tools.RecallArchive, "say"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	s := compile(t, append(character.DefaultTools(), give(), look())...)
	tests := []struct {
		name       string
		tool, args string
		want       map[string]any
		wantErr    error  // ErrUnknownTool or ErrInvalidArgs
		wantReason string // substring of the reason sent to the model
	}{
		{name: "valid", tool: "say", args: `{"text":"Welcome!"}`, want: map[string]any{"text": "Welcome!"}},
		{name: "numbers are float64", tool: "give", args: `{"item":"sword","to":"alice","count":2}`, want: map[string]any{"item": "sword", "to": "alice", "count": float64(2)}},
		{name: "empty args are {}", tool: "look", args: "", want: map[string]any{}},
		{name: "blank args are {}", tool: "look", args: "  \n", want: map[string]any{}},
		{name: "internal tool", tool: tools.RecallArchive, args: `{"id": 12, "offset": 6000}`, want: map[string]any{"id": float64(12), "offset": float64(6000)}},

		{name: "missing required", tool: "give", args: `{"item":"sword"}`, wantErr: tools.ErrInvalidArgs, wantReason: "to"},
		{name: "empty args for a tool with required params", tool: "say", args: "", wantErr: tools.ErrInvalidArgs, wantReason: "text"},
		{name: "wrong type", tool: "give", args: `{"item":"sword","to":"alice","count":"two"}`, wantErr: tools.ErrInvalidArgs, wantReason: "/count"},
		{name: "below minimum", tool: "give", args: `{"item":"sword","to":"alice","count":0}`, wantErr: tools.ErrInvalidArgs, wantReason: "/count"},
		{name: "additional property", tool: "say", args: `{"text":"hi","volume":11}`, wantErr: tools.ErrInvalidArgs, wantReason: "volume"},
		{name: "malformed JSON", tool: "say", args: `{"text":"hi"`, wantErr: tools.ErrInvalidArgs, wantReason: "not valid JSON"},
		{name: "trailing garbage", tool: "say", args: `{"text":"hi"} x`, wantErr: tools.ErrInvalidArgs, wantReason: "not valid JSON"},
		{name: "array instead of object", tool: "look", args: `[1]`, wantErr: tools.ErrInvalidArgs, wantReason: "object"},
		{name: "null", tool: "look", args: `null`, wantErr: tools.ErrInvalidArgs, wantReason: "object"},
		{name: "too long", tool: "say", args: `{"text":"` + strings.Repeat("a", tools.MaxArgsBytes) + `"}`, wantErr: tools.ErrInvalidArgs, wantReason: "longer than"},
		{name: "unknown tool", tool: "fly", args: `{}`, wantErr: tools.ErrUnknownTool, wantReason: `no tool "fly"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Validate(tt.tool, tt.args)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Validate (-want +got):\n%s", diff)
				}
				return
			}
			var ce *tools.CallError
			if !errors.As(err, &ce) {
				t.Fatalf("Validate = %v (%T), want a *CallError", err, err)
			}
			if ce.Tool != tt.tool || !errors.Is(err, tt.wantErr) {
				t.Errorf("CallError{Tool: %q, Err: %v}, want tool %q and %v", ce.Tool, ce.Err, tt.tool, tt.wantErr)
			}
			if !strings.HasPrefix(ce.Reason, "error: ") || !strings.Contains(ce.Reason, tt.wantReason) || err.Error() != ce.Reason {
				t.Errorf("Reason = %q, want an error line mentioning %q", ce.Reason, tt.wantReason)
			}
			if len(ce.Reason) > 2000 {
				t.Errorf("Reason is %d bytes, too long to send back to a model", len(ce.Reason))
			}
			var le *llm.Error
			if !errors.As(err, &le) || le.Code != llm.CodeBadToolCall {
				t.Errorf("errors.As(*llm.Error) = %v, want code %s", le, llm.CodeBadToolCall)
			}
			if llm.CodeOf(err) != llm.CodeBadToolCall {
				t.Errorf("CodeOf = %q", llm.CodeOf(err))
			}
		})
	}
	// The unknown-tool reason lists what the model may call instead.
	_, err := s.Validate("fly", "{}")
	for _, name := range []string{"say", "give", tools.MemorySearch} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("unknown-tool reason %q does not list %s", err, name)
		}
	}
}

// The schemas offered to the model drop what only bounds a call, and cost
// fewer tokens; the calls are still validated against the full schema.
func TestDefinitionsOfferCompactSchemas(t *testing.T) {
	spec := character.ToolSpec{Name: "sell", Description: "Sell an item.", Parameters: map[string]any{
		"type": "object",
		"properties": map[string]any{
			// A property named like a keyword is a property, kept.
			"maxLength": map[string]any{"type": "integer", "minimum": 1, "maximum": 9},
			"item":      map[string]any{"type": "string", "minLength": 1, "maxLength": 5, "enum": []any{"axe", "sword"}},
			"tags":      map[string]any{"type": "array", "maxItems": 3, "items": map[string]any{"type": "string", "maxLength": 8}},
			"note":      map[string]any{"type": "object", "default": map[string]any{"maxLength": 2}, "additionalProperties": map[string]any{"type": "string"}},
		},
		"required":             []any{"item"},
		"additionalProperties": false,
	}}
	set, err := tools.Compile([]character.ToolSpec{spec}, internals())
	if err != nil {
		t.Fatal(err)
	}
	var sell llm.Tool
	for _, d := range set.Definitions() {
		if d.Name == "sell" {
			sell = d
		}
	}
	var got map[string]any
	if err := json.Unmarshal(sell.Parameters, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"maxLength": map[string]any{"type": "integer", "minimum": 1.0, "maximum": 9.0},
			"item":      map[string]any{"type": "string", "enum": []any{"axe", "sword"}},
			"tags":      map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"note":      map[string]any{"type": "object", "default": map[string]any{"maxLength": 2.0}, "additionalProperties": map[string]any{"type": "string"}},
		},
		"required": []any{"item"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("offered schema (-want +got):\n%s", diff)
	}
	// Still validated against the whole schema.
	if _, err := set.Validate("sell", `{"item":"sword","extra":1}`); err == nil {
		t.Fatal("a property the schema forbids was accepted")
	}
	if _, err := set.Validate("sell", `{"item":"sword","tags":["a","b","c","d"]}`); err == nil {
		t.Fatal("more items than maxItems were accepted")
	}
	counter := llm.NewCounter(llm.BuiltinModel)
	full := 0
	for _, tl := range internals() {
		full += counter.Tools([]llm.Tool{{Name: tl.Name, Description: tl.Description, Parameters: tl.Parameters}})
	}
	offered := 0
	for _, d := range set.Definitions() {
		if d.Name != "sell" {
			offered += counter.Tools([]llm.Tool{d})
		}
	}
	if offered >= full {
		t.Fatalf("the internal tools cost %d tokens as offered, %d in full: nothing saved", offered, full)
	}
	// Not a JSON object: unchanged.
	if got := tools.PromptSchema(json.RawMessage(`true`)); string(got) != "true" {
		t.Fatalf("PromptSchema(true) = %s", got)
	}
}

// TestValidateGivesPlainValues checks that accepted arguments come back as
// json.Unmarshal makes them, numbers as float64 however deep, and that a
// number no float64 holds is refused with the tool named.
func TestValidateGivesPlainValues(t *testing.T) {
	trade := character.ToolSpec{Name: "trade", Description: "Offer a trade.", Parameters: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"price": map[string]any{"type": "number"},
			"lots":  map[string]any{"type": "array"},
			"terms": map[string]any{"type": "object"},
		},
	}}
	set := compile(t, give(), trade)
	for _, c := range []struct{ name, args string }{
		{"give", `{"item":"sword","to":"alice","count":2}`},
		{"trade", `{"price":12.5,"lots":[1,[2,{"n":3e2}],"x",null,true],"terms":{"days":7,"deep":{"rate":-0.25,"list":[1e-3]}}}`},
		{"trade", `{}`},
	} {
		got, err := set.Validate(c.name, c.args)
		if err != nil {
			t.Fatalf("Validate(%s, %s): %v", c.name, c.args, err)
		}
		var want map[string]any
		if err := json.Unmarshal([]byte(c.args), &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Validate(%s, %s) differs from json.Unmarshal (-want +got):\n%s", c.name, c.args, diff)
		}
	}
	for _, args := range []string{`{"price":1e400}`, `{"lots":[1,[-2e999]]}`, `{"terms":{"a":{"b":1e309}}}`} {
		_, err := set.Validate("trade", args)
		var ce *tools.CallError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "trade") || !strings.Contains(ce.Reason, "out of range") {
			t.Errorf("Validate(trade, %s) = %v, want a call error naming trade and the number out of range", args, err)
		}
	}
}
