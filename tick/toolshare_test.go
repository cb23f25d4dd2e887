package tick

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"weak"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/tools"
)

// NPCs that declare the same tools share one copy of their declarations
// and one compiled set; an NPC whose tools differ, or change, has its own;
// and the share does not keep alive a copy no NPC holds.
func TestNPCsThatDeclareTheSameToolsShareThem(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	look := character.ToolSpec{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object"}, Returns: true}
	listen := character.ToolSpec{Name: "listen", Description: "Listen", Parameters: map[string]any{"type": "object"}, Returns: true}
	put := func(id string, extra ...character.ToolSpec) {
		t.Helper()
		c := brom()
		c.ID = id
		c.Tools.V = append(character.DefaultTools(), extra...)
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, _, err := env.eng.PostEvents(ctx, id, []EventInput{{Kind: "say", Actor: "alice", Text: "Good morning."}}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.eng.Tick(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	set := func(id string) *tools.Set {
		t.Helper()
		v, ok := env.eng.toolsets.Load(id)
		if !ok {
			t.Fatalf("no tools kept for %s", id)
		}
		return v.(cachedSet).set
	}
	specs := func(id string) *character.ToolSpec {
		t.Helper()
		v, ok := env.eng.settings.Load(id)
		if !ok {
			t.Fatalf("no settings held for %s", id)
		}
		return &v.(*character.Character).Tools.V[0]
	}
	put("a", look)
	put("b", look)
	put("c")
	if set("a") != set("b") {
		t.Error("two NPCs declaring the same tools each have a compiled set of their own")
	}
	if specs("a") != specs("b") {
		t.Error("two NPCs declaring the same tools each hold a copy of the declarations")
	}
	if set("a") == set("c") || specs("a") == specs("c") {
		t.Error("an NPC declaring other tools shares the tools of another")
	}
	if _, ok := set("c").Lookup("look"); ok {
		t.Error("an NPC that declares no look tool has one")
	}
	put("a", look, listen)
	if set("a") == set("b") || specs("a") == specs("b") {
		t.Error("an NPC whose tools changed still shares the old ones")
	}
	if _, ok := set("a").Lookup("listen"); !ok {
		t.Error("an NPC whose tools changed does not have the new one")
	}
	if _, ok := set("b").Lookup("listen"); ok {
		t.Error("an NPC has a tool another NPC declared")
	}

	st := env.eng.shared.of([]character.ToolSpec{{Name: "ponder", Description: "Think it over"}})
	held := weak.Make(st)
	st = nil
	runtime.GC()
	if held.Value() != nil {
		t.Error("the share keeps alive a copy of tools no NPC holds")
	}
	// The entry of a copy collected goes (collected, which the runtime
	// calls once the copy is gone); one whose key a new copy took stays.
	share := env.eng.shared
	key, err := json.Marshal([]character.ToolSpec{{Name: "ponder", Description: "Think it over"}})
	if err != nil {
		t.Fatal(err)
	}
	share.collected(string(key))
	share.mu.Lock()
	_, kept := share.byKey[string(key)]
	share.mu.Unlock()
	if kept {
		t.Error("the entry of a collected copy is kept")
	}
	again := []character.ToolSpec{{Name: "ponder", Description: "Think it over"}}
	got := share.of(again)
	if &got.specs[0] != &again[0] {
		t.Error("the declarations of a copy collected are not shared anew")
	}
	share.collected(string(key))
	if share.of([]character.ToolSpec{{Name: "ponder", Description: "Think it over"}}) != got {
		t.Error("the entry of a copy still held was dropped")
	}
	runtime.KeepAlive(got)
}
