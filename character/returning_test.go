package character_test

import (
	"context"
	"errors"
	"testing"
	"time"

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

// Fresh reads an NPC as Get would: the state afresh, the settings copied
// while they are unchanged, read again once they changed or the NPC was
// created again; a gone NPC is ErrNotFound.
func TestFresh(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	old := get(t, s, "brom")
	check := func(what string, c *character.Character) {
		t.Helper()
		got, err := s.Fresh(ctx, c)
		if err != nil {
			t.Fatalf("%s: Fresh: %v", what, err)
		}
		if diff := cmp.Diff(get(t, s, "brom"), got); diff != "" {
			t.Errorf("%s: Fresh differs from Get (-Get +Fresh):\n%s", what, diff)
		}
	}
	check("unchanged", old)
	if err := s.UpdateState(ctx, "brom", map[string]any{"tick": 9, "sleep_mark": 4, "compaction_note": "a note"}); err != nil {
		t.Fatal(err)
	}
	check("state changed", old)
	c := get(t, s, "brom")
	c.Persona = "A different persona."
	time.Sleep(2 * time.Millisecond) // a new update time
	if _, err := s.Put(ctx, c); err != nil {
		t.Fatal(err)
	}
	check("settings changed", old)
	if got, _ := s.Fresh(ctx, old); got == nil || got.Persona != "A different persona." {
		t.Errorf("Fresh after a PUT kept the old settings: %+v", got)
	}
	if err := s.Delete(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fresh(ctx, old); !errors.Is(err, character.ErrNotFound) {
		t.Errorf("Fresh of a deleted NPC = %v, want ErrNotFound", err)
	}
	time.Sleep(2 * time.Millisecond)
	putNPC(t, s, "brom")
	check("created again", old)
}
