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

// Intake reads the name and the auto-tick settings, as stored.
func TestIntake(t *testing.T) {
	s := newStore(t)
	b := valid()
	b.ID, b.Name = "brom", "Brom"
	b.AutoTick = character.AutoTickSettings{Enabled: true, DebounceMS: 25, MaxWaitMS: 400}
	if _, err := s.Put(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	want := get(t, s, "brom")
	if !want.AutoTick.Enabled {
		t.Fatal("the auto-tick settings were not stored")
	}
	c, err := s.Intake(context.Background(), "brom")
	if err != nil || c.ID != "brom" || c.Name != want.Name || c.AutoTick != want.AutoTick {
		t.Errorf("Intake(brom) = %+v, %v; want name %q and auto-tick %+v", c, err, want.Name, want.AutoTick)
	}
	if _, err := s.Intake(context.Background(), "ghost"); !errors.Is(err, character.ErrNotFound) {
		t.Errorf("Intake(ghost) = %v, want ErrNotFound", err)
	}
}
