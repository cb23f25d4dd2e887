package journal

import (
	"context"
	"testing"
	"time"
)

// List with CreatedSince returns the entries written since that time, as
// the whole list filtered would, and not the older ones; with
// SourceMessages it keeps only those citing one of the messages.
func TestListCreatedSince(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	e.npc(t, "mara", t0)
	now := time.Now().UTC()
	add := func(npc string, created time.Time, msg int64, imp int) {
		t.Helper()
		en := &Entry{Type: TypeObservation, Content: "seen", Importance: imp, CreatedAt: created}
		en.Sources.V.MessageIDs = []int64{msg}
		if err := e.jour.Add(ctx, npc, en); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 50; i++ { // an old life
		add("brom", now.Add(-time.Duration(100-i)*time.Hour), int64(i), 9)
	}
	add("mara", now.Add(-time.Minute), 7, 9) // another NPC, written since
	add("brom", now.Add(-30*time.Minute), 7, 9)
	add("brom", now.Add(-20*time.Minute), 8, 3)
	add("brom", now.Add(-10*time.Minute), 9, 9)
	since := now.Add(-time.Hour)
	got, err := e.jour.List(ctx, "brom", ListQuery{CreatedSince: since})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Sources.V.MessageIDs[0] != 7 || got[2].Sources.V.MessageIDs[0] != 9 {
		t.Fatalf("since an hour ago: %d entries %+v, want the 3 written since, oldest first", len(got), got)
	}
	got, err = e.jour.List(ctx, "brom", ListQuery{CreatedSince: since, MinImportance: 8, SourceMessages: []int64{7, 8, 40}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Sources.V.MessageIDs[0] != 7 {
		t.Fatalf("important entries since an hour ago citing 7, 8 or 40: %+v, want only the one citing 7", got)
	}
	// Without the bound, the old entries citing 7, 8 and 40 are found too.
	got, err = e.jour.List(ctx, "brom", ListQuery{MinImportance: 8, SourceMessages: []int64{7, 8, 40}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("without CreatedSince: %d entries, want 4", len(got))
	}
	// Nothing written before the bound: the whole journal.
	got, err = e.jour.List(ctx, "mara", ListQuery{CreatedSince: since})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("mara since an hour ago: %d entries, want 1", len(got))
	}
}
