package character_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
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

func TestName(t *testing.T) {
	s := newStore(t)
	putNPC(t, s, "brom")
	if name, err := s.Name(context.Background(), "brom"); err != nil || name != "Brom" {
		t.Errorf("Name(brom) = %q, %v; want Brom", name, err)
	}
	if _, err := s.Name(context.Background(), "ghost"); !errors.Is(err, character.ErrNotFound) {
		t.Errorf("Name(ghost) = %v, want ErrNotFound", err)
	}
}
