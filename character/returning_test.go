package character_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUpdateStateReturning(t *testing.T) {
	s := newStore(t)
	putNPC(t, s, "brom")
	got, err := s.UpdateStateReturning(context.Background(), "brom", map[string]any{"tick": 7, "compaction_note": "a note"})
	if err != nil {
		t.Fatal(err)
	}
	want := get(t, s, "brom").State
	if got.Tick != 7 || got.CompactionNote != "a note" {
		t.Fatalf("UpdateStateReturning = %+v, want tick 7 and the note", got)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("UpdateStateReturning returned the state unlike it is stored (-stored +returned):\n%s", diff)
	}
}
