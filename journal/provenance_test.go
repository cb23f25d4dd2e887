package journal

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

func TestProvenanceFollowsEntriesToTheirEvents(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "npc", t0)
	e.npc(t, "other", t0)
	ctx := context.Background()
	entry := func(npc string, src character.Sources) int64 {
		en := &Entry{Type: TypeConversation, Content: "x", GameTime: t0, Sources: store.NewJSON(src)}
		if err := e.jour.Add(ctx, npc, en); err != nil {
			t.Fatal(err)
		}
		return en.ID
	}
	a := entry("npc", character.Sources{MessageIDs: []int64{1}, EventRefs: []string{"e1"}})
	b := entry("npc", character.Sources{MessageIDs: []int64{2}, EventRefs: []string{"e2"}})
	foreign := entry("other", character.Sources{EventRefs: []string{"theirs"}})
	refl := entry("npc", character.Sources{JournalIDs: []int64{a, b, foreign}})
	fact := entry("npc", character.Sources{JournalIDs: []int64{refl}, EventRefs: []string{"e0"}})
	// A cycle must not loop.
	loop := entry("npc", character.Sources{JournalIDs: []int64{fact}})
	if err := e.db.Model(&Entry{}).Where("id = ?", fact).Update("sources", store.NewJSON(character.Sources{JournalIDs: []int64{refl, loop}, EventRefs: []string{"e0"}})).Error; err != nil {
		t.Fatal(err)
	}

	got, err := e.jour.Provenance(ctx, "npc", character.Sources{JournalIDs: []int64{fact}})
	if err != nil {
		t.Fatal(err)
	}
	want := character.Sources{JournalIDs: []int64{fact, refl, loop, a, b, foreign}, MessageIDs: []int64{1, 2}, EventRefs: []string{"e0", "e1", "e2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("provenance (-want +got):\n%s", diff)
	}
}
