package character_test

import (
	"context"
	"testing"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

// profileRev reads NPC id's profile revision as the glance does.
func profileRev(t *testing.T, s *character.Store, id string) int64 {
	t.Helper()
	var rev int64
	if err := s.DB().Raw("SELECT COALESCE((SELECT rev FROM profile_revs WHERE character_id = ?), 0)", id).Scan(&rev).Error; err != nil {
		t.Fatal(err)
	}
	return rev
}

// Every change of what a tick shows of a profile moves the NPC's profile
// revision, through every write path: a first sighting, a sighting on a
// new day, a new display name, a new description or feeling, a fact added
// or superseded (with a new one, or alone), a profile deleted with its
// NPC. A sighting later the same day, an update that changes nothing and
// the changes of another NPC's profiles do not. The glance reads the
// revision. PostgreSQL keeps none.
func TestProfileRevCountsWhatTicksShow(t *testing.T) {
	ctx := context.Background()
	db := wholeDB(t)
	s := character.NewStore(db)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	if !store.IsSQLite(db) {
		// No revision on PostgreSQL, whose glance reads none.
		if db.Migrator().HasTable("profile_revs") {
			t.Fatal("PostgreSQL keeps profile revisions")
		}
		g, _, err := s.GlanceEvents(ctx, "brom", 5)
		if err != nil || g.Marked || g.ProfileRev != 0 {
			t.Fatalf("PostgreSQL glance: %+v, %v; want no marks", g, err)
		}
		return
	}
	day := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	rev, deleted := int64(0), false
	step := func(what string, moves bool, f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := profileRev(t, s, "brom")
		if moves && got <= rev || !moves && got != rev {
			t.Fatalf("%s: revision %d after %d, want it to move: %v", what, got, rev, moves)
		}
		rev = got
		if !deleted {
			g, _, err := s.GlanceEvents(ctx, "brom", 5)
			if err != nil {
				t.Fatalf("%s: glance: %v", what, err)
			}
			if !g.Marked || g.ProfileRev != rev {
				t.Fatalf("%s: glance read revision %d (marked %v), want %d", what, g.ProfileRev, g.Marked, rev)
			}
		}
	}
	step("first sighting", true, func() error { return s.NoteSeen(ctx, "brom", "alice", "", day) })
	step("sighting the same day", false, func() error { return s.NoteSeen(ctx, "brom", "alice", "", day.Add(3*time.Hour)) })
	step("sighting earlier", false, func() error { return s.NoteSeen(ctx, "brom", "alice", "", day.Add(-time.Hour)) })
	step("sighting the next day", true, func() error { return s.NoteSeen(ctx, "brom", "alice", "", day.Add(24*time.Hour)) })
	actor := character.ActorKey("p-7")
	step("an actor's first sighting", true, func() error { return s.NoteSeen(ctx, "brom", actor, "Bob", day) })
	step("the same name", false, func() error { return s.NoteSeen(ctx, "brom", actor, "Bob", day.Add(time.Hour)) })
	step("a new name", true, func() error { return s.NoteSeen(ctx, "brom", actor, "Robert", day.Add(2*time.Hour)) })
	step("a description", true, func() error {
		_, err := s.UpsertProfile(ctx, "brom", character.ProfileUpdate{Entity: "alice", Description: "a smith"})
		return err
	})
	step("the same description", false, func() error {
		_, err := s.UpsertProfile(ctx, "brom", character.ProfileUpdate{Entity: "alice", Description: "a smith"})
		return err
	})
	step("a feeling", true, func() error {
		_, err := s.UpsertProfile(ctx, "brom", character.ProfileUpdate{Entity: "alice", RelationshipDelta: map[string]float64{"trust": 0.5}})
		return err
	})
	step("a fact", true, func() error {
		_, _, err := s.AddFact(ctx, "brom", character.Fact{Entity: "alice", Key: "sword", Content: "lost her sword", Source: "tool"})
		return err
	})
	step("the same fact", false, func() error {
		_, _, err := s.AddFact(ctx, "brom", character.Fact{Entity: "alice", Key: "sword", Content: "lost her sword", Source: "tool"})
		return err
	})
	step("a superseding fact", true, func() error {
		_, _, err := s.AddFact(ctx, "brom", character.Fact{Entity: "alice", Key: "sword", Content: "found her sword", Source: "tool"})
		return err
	})
	step("a fact superseded alone", true, func() error {
		fs, err := s.Facts(ctx, "brom", "alice", true)
		if err != nil || len(fs) != 1 {
			t.Fatalf("current facts %v, %v", fs, err)
		}
		return s.SupersedeFact(ctx, "brom", fs[0].ID, fs[0].ID, day)
	})
	step("another NPC's profiles", false, func() error {
		if err := s.NoteSeen(ctx, "mara", "alice", "", day); err != nil {
			return err
		}
		_, _, err := s.AddFact(ctx, "mara", character.Fact{Entity: "alice", Content: "sells bread", Source: "tool"})
		return err
	})
	// Deleted, the NPC's revision keeps counting: an NPC created again
	// under the same id never finds the revision of lines shown of the
	// one before.
	deleted = true
	step("the NPC deleted", true, func() error { return s.Delete(ctx, "brom") })
}
