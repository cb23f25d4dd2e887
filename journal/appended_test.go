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

// AddFollowing tells the id of the NPC's own newest entry before those it
// adds, as the insert found it: 0 for the first, never another NPC's.
func TestAddFollowingTellsTheEntryBefore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	e.npc(t, "mara", t0)
	entry := func(text string) *Entry {
		return &Entry{Type: TypeObservation, Content: text, Importance: 5, GameTime: t0}
	}
	add := func(npc string, es ...*Entry) int64 {
		t.Helper()
		var prev int64
		err := store.Transaction(ctx, e.db, func(tx *gorm.DB) error {
			var err error
			prev, err = e.jour.WithTx(tx).AddFollowing(ctx, npc, es...)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return prev
	}
	first := entry("saw a heron")
	if prev := add("brom", first); store.IsSQLite(e.db) && prev != 0 {
		t.Fatalf("before brom's first entry: %d, want 0", prev)
	}
	add("mara", entry("saw a crow"))
	two := []*Entry{entry("saw a fox"), entry("saw a hare")}
	prev := add("brom", two...)
	if !store.IsSQLite(e.db) {
		if prev != -1 {
			t.Fatalf("on PostgreSQL: %d, want -1 (cannot tell)", prev)
		}
		return
	}
	if prev != first.ID || two[0].ID <= first.ID || two[1].ID <= two[0].ID {
		t.Fatalf("before brom's next two entries: %d, want %d (ids %d, %d after it)", prev, first.ID, two[0].ID, two[1].ID)
	}
}

// AppendedEntries indexes a commit's entries from memory only when the
// index holds the NPC's entries up to the one before them; a search given
// the marks the index is at reads nothing, and finds what one built from
// the database finds.
func TestAppendedEntriesKeepsTheIndexAsTheDatabaseWould(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	e.say(t, "brom", t0, []string{"wren says: the ferryman owes me four crowns"}, nil)
	r := e.retriever(t)
	if _, err := r.Search(ctx, "brom", "ferryman", 5); err != nil {
		t.Fatal(err)
	}
	x := r.npcs["brom"]
	add := func(text string) (*Entry, int64) {
		t.Helper()
		en := &Entry{Type: TypeObservation, Content: text, Importance: 7, GameTime: t0}
		var prev int64
		err := store.Transaction(ctx, e.db, func(tx *gorm.DB) error {
			var err error
			prev, err = e.jour.WithTx(tx).AddFollowing(ctx, "brom", en)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return en, prev
	}
	marks := func(newest int64) *Marks {
		t.Helper()
		st, err := e.chars.State(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		return &Marks{GameTime: st.State.GameTime, HistoryRev: st.State.HistoryRev, NewestEntry: newest}
	}
	last := func() int64 {
		x.mu.Lock()
		defer x.mu.Unlock()
		return x.lastEntry
	}
	// An entry another writer added between: the index does not hold the
	// entry before the commit's, and takes nothing from memory.
	between, _ := add("the mill's lantern was found broken")
	told, prev := add("wren's sister was seen at Kestrel Hollow")
	held := last()
	r.AppendedEntries("brom", prev, []*Entry{told})
	if got := last(); got != held {
		t.Fatalf("AppendedEntries after entry %d, which the index lacks, moved it to entry %d (from %d)", prev, got, held)
	}
	if want := between.ID; !store.IsSQLite(e.db) {
		want = -1 // PostgreSQL cannot tell
	} else if prev != want {
		t.Fatalf("AddFollowing: %d, want %d", prev, want)
	}
	search := func(r *Retriever, q string, m *Marks) []Result {
		t.Helper()
		rs, err := r.SearchWith(ctx, "brom", q, 5, SearchOptions{Marks: m})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	search(r, "lantern", marks(told.ID)) // the index is behind its marks: it reads both
	if got := last(); got != told.ID {
		t.Fatalf("a search whose marks the index was behind left it at entry %d, want %d", got, told.ID)
	}
	// The next commit's entry, told at the entry the index holds: taken
	// from memory (on SQLite, which tells the entry before), and a search
	// at the marks reads nothing.
	next, prev := add("Tomas hid the strongbox key by the hearth")
	r.AppendedEntries("brom", prev, []*Entry{next})
	if got := last(); store.IsSQLite(e.db) && got != next.ID {
		t.Fatalf("AppendedEntries at the index's entry left it at entry %d, want %d", got, next.ID)
	}
	fresh := e.retriever(t)
	for _, q := range []string{"strongbox key hearth", "lantern mill", "sister Kestrel Hollow", "ferryman crowns"} {
		got, want := search(r, q, marks(next.ID)), search(fresh, q, nil)
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: the index kept by AppendedEntries finds\n%+v\none built from the database\n%+v", q, got, want)
		}
	}
}
