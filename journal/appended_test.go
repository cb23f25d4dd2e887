package journal

import (
	"context"
	"reflect"
	"testing"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// appendAsTick stores msgs as a tick commits its turn: inserted, then the
// NPC's totals and history revision moved in the same transaction. It
// returns the revisions before and after.
func appendAsTick(t *testing.T, e *testEnv, npc string, msgs []*character.Message) (held, rev int64) {
	t.Helper()
	ctx := context.Background()
	st, err := e.chars.State(ctx, npc)
	if err != nil {
		t.Fatal(err)
	}
	held = st.State.HistoryRev
	err = store.Transaction(ctx, e.db, func(tx *gorm.DB) error {
		cs := e.chars.WithTx(tx)
		d, err := cs.InsertMessages(ctx, npc, msgs, llm.NewCounter(""), 0)
		if err != nil {
			return err
		}
		after, ok, err := cs.AdvanceState(ctx, npc, map[string]any{"turn": 1}, d, held)
		if err != nil {
			return err
		}
		if !ok {
			t.Fatal("the history moved under the test")
		}
		rev = after.HistoryRev
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return held, rev
}

// turn is a tick's messages: what was perceived, a call with no text, its
// result, and a reply.
func turn(text, reply string) []*character.Message {
	return []*character.Message{
		{Role: llm.RoleUser, Content: text, GameTime: t0, Turn: 1, EventRefs: store.NewJSON([]string{"ev-" + reply})},
		{Role: llm.RoleAssistant, GameTime: t0, Turn: 1, ToolCalls: store.NewJSON([]character.ToolCall{{ID: "c1", Name: "look", Args: "{}"}})},
		{Role: llm.RoleTool, Content: "The cellar holds three casks of Harrowdale red.", ToolCallID: "c1", ToolName: "look", GameTime: t0, Turn: 1},
		{Role: llm.RoleAssistant, Content: reply, GameTime: t0, Turn: 1},
	}
}

// Appended indexes a tick's messages from memory only when the index holds
// every message of the revision the tick appended to, never twice, and the
// index it leaves ranks as one built from the database.
func TestAppendedKeepsTheIndexAsTheDatabaseWould(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	e.say(t, "brom", t0, []string{"wren says: the ferryman owes me four crowns"}, nil)
	r := e.retriever(t)
	search := func(r *Retriever, q string) []Result {
		t.Helper()
		rs, err := r.Search(ctx, "brom", q, 5)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	search(r, "ferryman")
	x := r.npcs["brom"]
	items := func() int {
		x.mu.Lock()
		defer x.mu.Unlock()
		return len(x.items)
	}
	before := items()

	// Appended to another revision than the index holds: nothing.
	msgs := turn("wren says: where is my map of Kestrel Hollow?", "Your map is in the oak chest, Wren.")
	held, rev := appendAsTick(t, e, "brom", msgs)
	r.Appended("brom", held+1, rev, msgs)
	if n := items(); n != before {
		t.Fatalf("Appended at a revision the index does not hold indexed %d items", n-before)
	}
	search(r, "map") // reads the turn from the database
	if n := items(); n != before+3 {
		t.Fatalf("after a search the index holds %d new items, want 3 (the call without text is not searchable)", n-before)
	}
	// Told again after the search read it: nothing twice.
	r.Appended("brom", held, rev, msgs)
	if n := items(); n != before+3 {
		t.Fatalf("Appended of messages a search had read indexed them again: %d new items", n-before)
	}

	// The next turn, told at the revision the index holds: indexed from
	// memory, and the next search reads nothing back.
	before = items()
	msgs = turn("tomas says: the strongbox key hangs by the hearth", "Aye, by the hearth it stays, Tomas.")
	msgs = append(msgs, &character.Message{Role: llm.RoleSystem, Content: "npcd: a note no search shows", GameTime: t0, Turn: 1})
	held, rev = appendAsTick(t, e, "brom", msgs)
	r.Appended("brom", held, rev, msgs)
	x.mu.Lock()
	n, last, kept := len(x.items), x.lastMsg, x.histRev
	_, shown := x.rows.get(itemKey{kindMessage, msgs[3].ID})
	x.mu.Unlock()
	if n != before+3 || last != msgs[3].ID || kept != rev {
		t.Fatalf("Appended: %d new items, last message %d, revision %d; want 3, %d, %d", n-before, last, kept, msgs[3].ID, rev)
	}
	// The newest messages are kept as results, as a refresh keeps them.
	if !shown {
		t.Fatal("Appended kept no result of the newest message")
	}
	fresh := e.retriever(t)
	for _, q := range []string{"strongbox key hearth", "ferryman crowns", "Harrowdale casks", "map oak chest"} {
		if got, want := search(r, q), search(fresh, q); len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: the index kept by Appended finds\n%+v\none built from the database\n%+v", q, got, want)
		}
	}
	if n := items(); n != before+3 {
		t.Fatalf("a search after Appended indexed %d more items", n-before-3)
	}
}
