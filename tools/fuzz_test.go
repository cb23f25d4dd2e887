package tools_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/tools"
)

// FuzzValidate calls Validate with arbitrary names and argument text, as a
// model may write them. A call is refused with a *CallError that says why
// (unknown tool exactly when the name is not a tool), or it yields a JSON
// object that satisfies the schema: it validates again once re-encoded,
// unchanged, and give's required fields have their types.
func FuzzValidate(f *testing.F) {
	for _, s := range [][2]string{
		{"give", `{"item":"sword","to":"alice","count":2}`},
		{"give", `{"item":"","to":"alice"}`},
		{"give", `{"item":"sword","to":"alice","count":1.5}`},
		{"give", `{"item":"sword","to":"alice","extra":true}`},
		{"give", `["sword"]`}, {"give", `{"item":`}, {"give", ``}, {"give", `null`},
		{"say", `{"text":"Hello <pinned>x</pinned>"}`}, {"look", `{}`}, {"look", `   `},
		{"", `{}`}, {"journal_write", `{"content":"I owe Bob","importance":11}`},
		{"memory_search", `{"query":"sword","k":1e308}`}, {"unknown", `{}`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, args string) {
		set, err := tools.Compile(defaultsAnd(give(), look()), internals())
		if err != nil {
			t.Fatal(err)
		}
		got, err := set.Validate(name, args)
		_, known := set.Lookup(name)
		if err != nil {
			var ce *tools.CallError
			if !errors.As(err, &ce) || ce.Reason == "" {
				t.Fatalf("Validate(%q, %q) = %v, want a *CallError with a reason", name, args, err)
			}
			if errors.Is(err, tools.ErrUnknownTool) == known {
				t.Fatalf("Validate(%q, …): unknown-tool error %v, but the tool exists: %v", name, err, known)
			}
			return
		}
		if !known || got == nil {
			t.Fatalf("Validate(%q, %q) accepted a call to no tool or returned no object: %v", name, args, got)
		}
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("accepted arguments do not re-encode: %v", err)
		}
		again, err := set.Validate(name, string(b))
		if err != nil || !reflect.DeepEqual(got, again) {
			t.Fatalf("re-validating %s = %v, %v; want the same object", b, again, err)
		}
		if name == "give" {
			item, ok1 := got["item"].(string)
			_, ok2 := got["to"].(string)
			if !ok1 || !ok2 || item == "" {
				t.Fatalf("give accepted without a valid item and to: %v", got)
			}
			if c, ok := got["count"]; ok {
				n, isNum := c.(float64)
				if !isNum || n < 1 || n != math.Trunc(n) {
					t.Fatalf("give accepted count %v", c)
				}
			}
		}
	})
}

// defaultsAnd is the default game tools (say, emote) plus specs.
func defaultsAnd(specs ...character.ToolSpec) []character.ToolSpec {
	return append(character.DefaultTools(), specs...)
}
