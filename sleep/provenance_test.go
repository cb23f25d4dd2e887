package sleep_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/testdb"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
)

// A fact's provenance computed from the batch is the one the journal's
// query gives, and an entry citing entries is followed by the query.
func TestProvenanceFromTheBatch(t *testing.T) {
	ctx := context.Background()
	db := testdb.Open(t)
	js := journal.NewStore(db)
	if err := character.NewStore(db).Create(ctx, &character.Character{ID: "brom", Name: "Brom", Persona: "p"}); err != nil {
		t.Fatal(err)
	}
	mk := func(msgs []int64, refs []string, cites []int64) *journal.Entry {
		e := &journal.Entry{Type: journal.TypeConversation, Importance: 5, Content: "alice says: hello"}
		e.Sources.V = character.Sources{MessageIDs: msgs, EventRefs: refs, JournalIDs: cites}
		return e
	}
	a, b := mk([]int64{3, 1}, []string{"ev-2", "ev-1"}, nil), mk([]int64{1, 7}, []string{"ev-1", "ev-9"}, nil)
	if err := js.Add(ctx, "brom", a, b); err != nil {
		t.Fatal(err)
	}
	r := mk(nil, []string{"ev-5"}, []int64{a.ID})
	if err := js.Add(ctx, "brom", r); err != nil {
		t.Fatal(err)
	}
	batch, err := js.Unconsolidated(ctx, "brom", 10)
	if err != nil || len(batch) != 3 {
		t.Fatalf("batch %v, %v", batch, err)
	}
	byID := map[int64]journal.Entry{}
	for _, e := range batch {
		byID[e.ID] = e
	}
	for _, src := range []character.Sources{
		{JournalIDs: []int64{b.ID, a.ID}},
		{JournalIDs: []int64{a.ID, a.ID}, MessageIDs: []int64{9}},
		{JournalIDs: []int64{r.ID, b.ID}},
		{JournalIDs: []int64{a.ID, 99999}},
		{},
	} {
		want, err := js.Provenance(ctx, "brom", src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sleep.ProvenanceFromBatch(ctx, js, "brom", src, byID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("sources %+v (-query +batch):\n%s", src, diff)
		}
	}
}
