package journal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/store"
)

func TestAddMemoryFillsDerivedFields(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		in      Memory
		want    Memory
		wantErr error
	}{
		{
			name: "defaults",
			in:   Memory{Content: "  Alice lost her sword.  ", Importance: 0},
			want: Memory{Content: "Alice lost her sword.", Importance: Importance("", "Alice lost her sword."), ContentHash: ContentHash("alice lost her sword")},
		},
		{
			name: "importance clamped, times kept",
			in:   Memory{Content: "Bob owes ten gold", Importance: 42, GameTime: t0, ValidFrom: t0.Add(time.Hour)},
			want: Memory{Content: "Bob owes ten gold", Importance: 10, ContentHash: ContentHash("Bob owes ten gold"), GameTime: t0, ValidFrom: t0.Add(time.Hour)},
		},
		{
			name: "valid from defaults to game time",
			in:   Memory{Content: "x marks the spot", Importance: -3, GameTime: t0},
			want: Memory{Content: "x marks the spot", Importance: 1, ContentHash: ContentHash("x marks the spot"), GameTime: t0, ValidFrom: t0},
		},
		{name: "empty", in: Memory{Content: "   "}, wantErr: ErrInvalid},
		{name: "bad embedding", in: Memory{Content: "a b", Embedding: []byte{1, 2, 3}, EmbedModel: "m"}, wantErr: ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.in
			_, err := e.jour.AddMemory(ctx, "brom", &m)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got, err := e.jour.Memory(ctx, "brom", m.ID)
			if err != nil {
				t.Fatal(err)
			}
			ignore := cmpopts.IgnoreFields(Memory{}, "ID", "CharacterID", "Rev", "CreatedAt", "UpdatedAt", "Sources")
			want := tc.want
			if want.GameTime.IsZero() {
				// Defaults to now: take what was stored, check ValidFrom follows.
				want.GameTime, want.ValidFrom = got.GameTime, got.GameTime
				if time.Since(got.GameTime) > time.Minute {
					t.Fatalf("game time %v is not now", got.GameTime)
				}
			}
			if diff := cmp.Diff(want, *got, ignore, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("stored memory (-want +got):\n%s", diff)
			}
			if got.CharacterID != "brom" || got.Rev == 0 {
				t.Fatalf("character %q, rev %d", got.CharacterID, got.Rev)
			}
		})
	}
}

func TestSupersedeKeepsTheOldMemory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	old := &Memory{Content: "Alice lives by the mill", Entity: "alice", Key: "home", GameTime: t0}
	if _, err := e.jour.AddMemory(ctx, "brom", old); err != nil {
		t.Fatal(err)
	}
	other := &Memory{Content: "Alice likes plums", Entity: "alice", GameTime: t0}
	if _, err := e.jour.AddMemory(ctx, "brom", other); err != nil {
		t.Fatal(err)
	}
	moved := &Memory{Content: "Alice moved to the harbor", Entity: "alice", Key: "home", GameTime: t0.Add(24 * time.Hour)}
	sup, err := e.jour.AddMemory(ctx, "brom", moved)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{old.ID}, sup); diff != "" {
		t.Fatalf("superseded by the slot (-want +got):\n%s", diff)
	}
	again := &Memory{Content: "Alice loves plums", Entity: "alice", GameTime: t0.Add(48 * time.Hour)}
	if err := e.jour.Supersede(ctx, "brom", other.ID, again); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    MemoryQuery
		want []int64
	}{
		{"current", MemoryQuery{}, []int64{moved.ID, again.ID}},
		{"with superseded", MemoryQuery{Superseded: true}, []int64{old.ID, other.ID, moved.ID, again.ID}},
		{"slot", MemoryQuery{Entity: "alice", Key: "home", Superseded: true}, []int64{old.ID, moved.ID}},
		{"newest", MemoryQuery{Superseded: true, Limit: 1}, []int64{again.ID}},
		{"before", MemoryQuery{Superseded: true, Before: moved.ID}, []int64{old.ID, other.ID}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := e.jour.Memories(ctx, "brom", tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, m := range ms {
				got = append(got, m.ID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("ids (-want +got):\n%s", diff)
			}
		})
	}
	got, err := e.jour.Memory(ctx, "brom", old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Current() || *got.SupersededBy != moved.ID || !got.SupersededAt.Equal(moved.ValidFrom) {
		t.Fatalf("old memory: superseded by %v at %v", got.SupersededBy, got.SupersededAt)
	}
	if err := e.jour.Supersede(ctx, "brom", old.ID, &Memory{Content: "again"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("superseding a superseded memory: %v, want ErrInvalid", err)
	}
	if err := e.jour.Supersede(ctx, "brom", 999, &Memory{Content: "again"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("superseding a missing memory: %v, want ErrNotFound", err)
	}
	if _, err := e.jour.Memory(ctx, "mira", old.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another NPC's memory: %v, want ErrNotFound", err)
	}
}

// A memory cited again and again keeps its first citations and its
// latest, a bounded list of each kind, in order.
func TestCiteMoreKeepsTheFirstAndLatestCitations(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := &Memory{Content: "Alice drinks mead.", GameTime: t0, Sources: store.NewJSON(character.Sources{MessageIDs: []int64{1}, EventRefs: []string{"ev-1"}})}
	if _, err := e.jour.AddMemory(ctx, "brom", m); err != nil {
		t.Fatal(err)
	}
	for i := int64(2); i <= 200; i++ {
		src := character.Sources{MessageIDs: []int64{i}, EventRefs: []string{fmt.Sprintf("ev-%d", i)}, JournalIDs: []int64{1000 + i}}
		if err := e.jour.CiteMore(ctx, "brom", m.ID, src); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.jour.CiteMore(ctx, "brom", m.ID+1, character.Sources{MessageIDs: []int64{1}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cite more for no memory: %v, want ErrNotFound", err)
	}
	got, err := e.jour.Memory(ctx, "brom", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for i := int64(1); i <= firstCitations; i++ {
		want = append(want, i)
	}
	for i := int64(200 - (maxCitations - firstCitations) + 1); i <= 200; i++ {
		want = append(want, i)
	}
	src := got.Sources.V
	if diff := cmp.Diff(want, src.MessageIDs); diff != "" {
		t.Errorf("message ids (-want +got):\n%s", diff)
	}
	if len(src.EventRefs) != maxCitations || src.EventRefs[0] != "ev-1" || src.EventRefs[maxCitations-1] != "ev-200" {
		t.Errorf("event refs %v: want %d, from ev-1 to ev-200", src.EventRefs, maxCitations)
	}
	if len(src.JournalIDs) != maxCitations || src.JournalIDs[0] != 1002 || src.JournalIDs[maxCitations-1] != 1200 {
		t.Errorf("journal ids %v: want %d, from 1002 to 1200", src.JournalIDs, maxCitations)
	}
}

func TestDuplicateHelpers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sword := &Memory{Content: "Alice lost her silver sword at the forge.", GameTime: t0}
	bread := &Memory{Content: "Bob bakes rye bread on Sundays.", GameTime: t0}
	for _, m := range []*Memory{sword, bread} {
		if _, err := e.jour.AddMemory(ctx, "brom", m); err != nil {
			t.Fatal(err)
		}
	}
	dups, err := e.jour.MemoriesByHash(ctx, "brom", "alice LOST her silver sword at the forge")
	if err != nil || len(dups) != 1 || dups[0].ID != sword.ID {
		t.Fatalf("by hash: %v, %v", dups, err)
	}
	if dups, _ := e.jour.MemoriesByHash(ctx, "mira", sword.Content); len(dups) != 0 {
		t.Fatalf("by hash, other NPC: %v", dups)
	}
	byHash, err := e.jour.MemoriesByHashes(ctx, "brom", []string{"alice LOST her silver sword at the forge", bread.Content, "nothing like it"})
	if err != nil || len(byHash) != 2 || byHash[ContentHash(sword.Content)][0].ID != sword.ID || byHash[ContentHash(bread.Content)][0].ID != bread.ID {
		t.Fatalf("by hashes: %v, %v", byHash, err)
	}
	if byHash, _ := e.jour.MemoriesByHashes(ctx, "mira", []string{sword.Content}); len(byHash) != 0 {
		t.Fatalf("by hashes, other NPC: %v", byHash)
	}
	r := e.retriever(t)
	tests := []struct {
		content string
		want    []int64
	}{
		{"Alice lost her silver swords at the forge", []int64{sword.ID}},
		{"Alice lost a sword", nil}, // shares words, not the fact
		{"The harbor is full of ships", nil},
	}
	for _, tc := range tests {
		t.Run(tc.content, func(t *testing.T) {
			ms, err := r.NearDuplicates(ctx, "brom", tc.content, 0.9, 5)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, m := range ms {
				got = append(got, m.Memory.ID)
				if m.Similarity < 0.9 {
					t.Errorf("similarity %v below the threshold", m.Similarity)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("near duplicates (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := r.NearDuplicates(ctx, "brom", "x", 0, 5); !errors.Is(err, ErrInvalid) {
		t.Fatalf("threshold 0: %v, want ErrInvalid", err)
	}
}

// TestNearDuplicatesAreCurrentMemoriesOnly: messages with a memory's very
// words are no duplicates of it, nor is a superseded memory; the current
// ones come best first, cut at the limit, and the index follows memories
// added after it was built.
func TestNearDuplicatesAreCurrentMemoriesOnly(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	ctx := context.Background()
	const fact = "Alice lost her silver sword at the forge."
	texts := make([]string, 40)
	for i := range texts {
		texts[i] = fact
	}
	e.say(t, "brom", t0, texts, nil)
	old := &Memory{Content: fact, Entity: "alice", Key: "sword", GameTime: t0}
	if _, err := e.jour.AddMemory(ctx, "brom", old); err != nil {
		t.Fatal(err)
	}
	current := &Memory{Content: fact, Entity: "alice", Key: "sword", GameTime: t0.Add(time.Hour)}
	if sup, err := e.jour.AddMemory(ctx, "brom", current); err != nil || len(sup) != 1 || sup[0] != old.ID {
		t.Fatalf("supersede by the slot: %v, %v", sup, err)
	}
	r := e.retriever(t)
	near := func(limit int) []MemoryMatch {
		t.Helper()
		ms, err := r.NearDuplicates(ctx, "brom", "alice lost her silver sword at the forge", 0.9, limit)
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	if ms := near(5); len(ms) != 1 || ms[0].Memory.ID != current.ID || ms[0].Similarity < 0.99 {
		t.Fatalf("near duplicates %+v, want only memory %d", ms, current.ID)
	}
	close := &Memory{Content: "Alice lost her silver swords at the forge!", GameTime: t0.Add(2 * time.Hour)}
	if _, err := e.jour.AddMemory(ctx, "brom", close); err != nil {
		t.Fatal(err)
	}
	ms := near(5)
	if len(ms) != 2 || ms[0].Memory.ID != current.ID || ms[1].Memory.ID != close.ID || ms[0].Similarity <= ms[1].Similarity {
		t.Fatalf("near duplicates %+v, want %d then %d, best first", ms, current.ID, close.ID)
	}
	if ms := near(1); len(ms) != 1 || ms[0].Memory.ID != current.ID {
		t.Fatalf("limit 1: %+v, want only %d", ms, current.ID)
	}
}

func TestIndexFollowsWrites(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	ctx := context.Background()
	r := e.retriever(t, plain()...)
	find := func(q string) []string {
		t.Helper()
		rs, err := r.Search(ctx, "brom", q, 3)
		if err != nil {
			t.Fatal(err)
		}
		return contents(rs)
	}
	if got := find("dragon"); len(got) != 0 {
		t.Fatalf("empty NPC: %v", got)
	}
	e.say(t, "brom", t0, []string{"A dragon was seen over the hills."}, nil)
	if got := find("dragon"); len(got) != 1 {
		t.Fatalf("new message: %v", got)
	}
	if err := e.jour.Add(ctx, "brom", &Entry{Type: TypeNote, Content: "Dragons fear the bell of the chapel.", Importance: 7, GameTime: t0}); err != nil {
		t.Fatal(err)
	}
	if got := find("dragon"); len(got) != 2 {
		t.Fatalf("new entry: %v", got)
	}
	m := &Memory{Content: "The dragon lairs in the old quarry", GameTime: t0}
	if _, err := e.jour.AddMemory(ctx, "brom", m); err != nil {
		t.Fatal(err)
	}
	if got := find("dragon quarry"); len(got) == 0 || got[0] != m.Content {
		t.Fatalf("new memory: %v", got)
	}
	if err := e.jour.Supersede(ctx, "brom", m.ID, &Memory{Content: "The dragon left the quarry for the mountains", GameTime: t0}); err != nil {
		t.Fatal(err)
	}
	rs, err := r.Search(ctx, "brom", "dragon quarry", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range rs {
		if res.ID == m.ID && res.Kind == KindMemory && res.Parts[PartSuperseded] != 1 {
			t.Fatalf("superseded memory not marked: %+v", res)
		}
	}
	// The NPC is deleted and made again: nothing of the old one remains.
	err = e.db.Transaction(func(tx *gorm.DB) error {
		if err := e.chars.WithTx(tx).Delete(ctx, "brom"); err != nil {
			return err
		}
		if err := e.jour.DeleteNPC(ctx, tx, "brom"); err != nil {
			return err
		}
		return r.DeleteNPC(ctx, tx, "brom")
	})
	if err != nil {
		t.Fatal(err)
	}
	e.npc(t, "brom", t0)
	e.say(t, "brom", t0, []string{"A quiet day without a dragon."}, nil)
	if got := find("dragon quarry"); len(got) != 1 || got[0] != "A quiet day without a dragon." {
		t.Fatalf("after delete: %v", got)
	}
}

func TestRecallsAreRecorded(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	ctx := context.Background()
	m := &Memory{Content: "Alice owes me ten gold", GameTime: t0.Add(-time.Hour)}
	if _, err := e.jour.AddMemory(ctx, "brom", m); err != nil {
		t.Fatal(err)
	}
	r := e.retriever(t)
	for i := 0; i < 2; i++ {
		if rs, err := r.Search(ctx, "brom", "gold owed", 1); err != nil || len(rs) != 1 {
			t.Fatalf("search: %v, %v", rs, err)
		}
	}
	got, _ := e.jour.Memory(ctx, "brom", m.ID)
	if got.AccessCount != 0 {
		t.Fatalf("written before a flush: %d", got.AccessCount)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = e.jour.Memory(ctx, "brom", m.ID)
	if got.AccessCount != 2 || got.LastAccessed == nil || !got.LastAccessed.Equal(t0) {
		t.Fatalf("access count %d, last accessed %v; want 2 at %v (the NPC's game time)", got.AccessCount, got.LastAccessed, t0)
	}
	if got.Rev != m.Rev || got.UpdatedAt.After(got.CreatedAt.Add(time.Second)) {
		t.Fatalf("a recall changed the revision (%d, was %d) or the update time", got.Rev, m.Rev)
	}
}

// A database made before memories existed gets its old rows indexed when
// it is upgraded.
func TestUpgradeIndexesExistingRows(t *testing.T) {
	ctx := context.Background()
	db := dbtest.Open(t)
	v1 := append(character.Migrations(), Migrations()[0])
	if err := store.Migrate(ctx, db, v1); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{db: db, chars: character.NewStore(db), jour: NewStore(db)}
	e.npc(t, "brom", t0)
	e.say(t, "brom", t0, []string{"Alice hid the key under the well."}, []string{"old-1"})
	if err := e.jour.Add(ctx, "brom", &Entry{Type: TypeNote, Content: "The well key opens the chapel.", Importance: 6}); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, db, append(character.Migrations(), Migrations()...)); err != nil {
		t.Fatal(err)
	}
	v, err := store.Versions(ctx, db)
	if err != nil || v["journal"] != len(Migrations()) {
		t.Fatalf("versions %v, %v", v, err)
	}
	rs, err := e.jour.Search(ctx, "brom", "well key", 5)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range rs {
		kinds = append(kinds, r.Kind)
	}
	if diff := cmp.Diff([]string{KindJournal, KindMessage}, kinds, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Fatalf("kinds found (-want +got):\n%s", diff)
	}
	// Rows written after the upgrade are indexed by the triggers.
	e.say(t, "brom", t0, []string{"The key is gone from the well."}, nil)
	if rs, _ := e.jour.Search(ctx, "brom", "gone", 5); len(rs) != 1 {
		t.Fatalf("new row after upgrade: %v", rs)
	}
}

func TestSnippet(t *testing.T) {
	long := "Alice says: I went to the market this morning. The baker was out of rye. " +
		"Then I walked past the forge and saw my lost sword on the anvil! Bob said he found it by the river. " +
		"We argued about the price for an hour. In the end I paid three silver."
	sentence := "we walked along the river and the road and the fields until at last the old sword appeared in the grass beside the ruined tower where nobody goes"
	tests := []struct {
		name    string
		content string
		terms   []string
		max     int
		want    string
	}{
		{"short stays whole", "Alice lost her sword.", []string{"sword"}, 100, "Alice lost her sword."},
		{"no limit", long, []string{"sword"}, 0, long},
		{
			name: "the matching sentence, then what follows", content: long, terms: []string{"sword", "anvil"}, max: 120,
			want: "… Then I walked past the forge and saw my lost sword on the anvil! Bob said he found it by the river. …",
		},
		{
			name: "the first sentence when it fits", content: long, terms: []string{"sword", "anvil"}, max: 160,
			want: "Alice says: I went to the market this morning. … Then I walked past the forge and saw my lost sword on the anvil! Bob said he found it by the river. …",
		},
		{
			name: "to the end", content: long, terms: []string{"price"}, max: 150,
			want: "Alice says: I went to the market this morning. … We argued about the price for an hour. In the end I paid three silver.",
		},
		{
			name: "one long sentence is cut at words around the match", content: sentence, terms: []string{"sword"}, max: 60,
			want: "…last the old sword appeared in the grass beside…",
		},
		{
			name: "no match keeps the head", content: sentence, terms: []string{"dragon"}, max: 60,
			want: "we walked along the river and the road and the…",
		},
		{
			name: "text without spaces is cut between characters", content: strings.Repeat("東京は大きい", 10) + "剣" + strings.Repeat("街です", 10), terms: []string{"剣"}, max: 40,
			want: "…きい剣街です街です街…",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := snippet(tc.content, tc.terms, tc.max)
			if got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
			if tc.max > 0 && len(got) > tc.max {
				t.Fatalf("%d bytes, over %d", len(got), tc.max)
			}
		})
	}
}

// AddMemories writes a batch as AddMemory would one memory after the other:
// each memory of a slot supersedes what is current in it when it comes,
// earlier memories of the same batch included; all share one revision.
func TestAddMemoriesIsAddMemoryInTurn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	old := &Memory{Content: "Bob has a sword", Entity: "bob", Key: "sword", GameTime: t0}
	if _, err := e.jour.AddMemory(ctx, "brom", old); err != nil {
		t.Fatal(err)
	}
	other := &Memory{Content: "Ann has a sword", Entity: "ann", Key: "sword", GameTime: t0}
	if _, err := e.jour.AddMemory(ctx, "brom", other); err != nil {
		t.Fatal(err)
	}
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	batch := []*Memory{
		{Content: "Bob sold his sword", Entity: "bob", Key: "sword", GameTime: at(1)},
		{Content: "It rained all day", GameTime: at(2)},
		{Content: "Bob bought an axe instead of a sword", Entity: "bob", Key: "sword", GameTime: at(3)},
		{Content: "Bob lives by the mill", Entity: "bob", Key: "home", GameTime: at(4)},
	}
	sup, err := e.jour.AddMemories(ctx, "brom", batch...)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int64{{old.ID}, nil, {batch[0].ID}, nil}, sup, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("superseded (-want +got):\n%s", diff)
	}
	for i, m := range batch {
		if m.ID == 0 || (i > 0 && m.ID <= batch[i-1].ID) {
			t.Fatalf("ids %d, %d: want new ids in order", batch[max(i-1, 0)].ID, m.ID)
		}
		if m.Rev != batch[0].Rev || m.Rev <= other.Rev {
			t.Errorf("memory %d rev %d, want the batch's one revision after %d", i, m.Rev, other.Rev)
		}
	}
	want := map[int64]struct {
		by int64
		at time.Time
	}{old.ID: {batch[0].ID, at(1)}, batch[0].ID: {batch[2].ID, at(3)}}
	all, err := e.jour.Memories(ctx, "brom", MemoryQuery{Superseded: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 6 {
		t.Fatalf("%d memories, want 6", len(all))
	}
	for _, m := range all {
		w, superseded := want[m.ID]
		switch {
		case superseded && (m.SupersededBy == nil || *m.SupersededBy != w.by || !m.SupersededAt.Equal(w.at)):
			t.Errorf("memory %d (%s) superseded by %v at %v, want by %d at %v", m.ID, m.Content, m.SupersededBy, m.SupersededAt, w.by, w.at)
		case !superseded && !m.Current():
			t.Errorf("memory %d (%s) was superseded", m.ID, m.Content)
		}
	}
	// A bad memory stores none of its batch.
	if _, err := e.jour.AddMemories(ctx, "brom", &Memory{Content: "fine"}, &Memory{Content: "  "}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("batch with an empty memory: %v, want ErrInvalid", err)
	}
	if n, _, _ := e.jour.CountMemories(ctx, "brom"); n != 4 {
		t.Errorf("%d current memories after the refused batch, want 4", n)
	}
}

// AddGroundedMemories stores the text it is given, grounded by the caller,
// as AddMemories stores the same text ungrounded: same content, same hash,
// the slot superseded the same way; it grounds nothing again and refuses a
// memory without its game time.
func TestAddGroundedMemoriesStoresWhatAddMemoriesWould(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 24, 10, 4, 0, 0, time.UTC)
	raw := []string{"The wolves took 3 sheep last night", "Bob moved to Riverton last week", "I work as a miller"}
	var plain, grounded []*Memory
	for _, r := range raw {
		plain = append(plain, &Memory{Content: r, Entity: "bob", Key: "news", GameTime: at})
		grounded = append(grounded, &Memory{Content: e.jour.Ground(r, at), Entity: "bob", Key: "news", GameTime: at})
	}
	if _, err := e.jour.AddMemories(ctx, "brom", plain...); err != nil {
		t.Fatal(err)
	}
	sup, err := e.jour.AddGroundedMemories(ctx, "mara", grounded...)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int64{nil, {grounded[0].ID}, {grounded[1].ID}}, sup, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("superseded (-want +got):\n%s", diff)
	}
	if grounded[0].Content == raw[0] {
		t.Fatalf("the test's text has nothing to ground: %q", raw[0])
	}
	for i := range raw {
		p, g := plain[i], grounded[i]
		if g.Content != p.Content || g.ContentHash != p.ContentHash {
			t.Errorf("memory %d: grounded stored %q (%s), AddMemories %q (%s)", i, g.Content, g.ContentHash, p.Content, p.ContentHash)
		}
	}
	for _, npc := range []string{"brom", "mara"} {
		ms, err := e.jour.Memories(ctx, npc, MemoryQuery{Superseded: true})
		if err != nil || len(ms) != len(raw) {
			t.Fatalf("memories of %s: %d, %v", npc, len(ms), err)
		}
		for _, m := range ms {
			if strings.Count(m.Content, "[") > 1 {
				t.Errorf("memory of %s grounded twice: %q", npc, m.Content)
			}
		}
	}
	// Text grounded again would be grounded twice: the caller is trusted,
	// and the text is stored as given.
	twice := &Memory{Content: "Seen the day before [23 November 2026] yesterday", GameTime: at}
	if _, err := e.jour.AddGroundedMemories(ctx, "mara", twice); err != nil || twice.Content != "Seen the day before [23 November 2026] yesterday" {
		t.Errorf("AddGroundedMemories changed %q (%v)", twice.Content, err)
	}
	if _, err := e.jour.AddGroundedMemories(ctx, "mara", &Memory{Content: "no time"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a grounded memory without its game time: %v, want ErrInvalid", err)
	}
}
