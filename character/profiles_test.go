package character_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

func TestUpsertProfile(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	day := func(d int) time.Time { return time.Date(2026, 11, d, 10, 0, 0, 0, time.UTC) }

	steps := []struct {
		name string
		u    character.ProfileUpdate
		want character.Profile // compared on the fields below
	}{
		{
			name: "created on first sighting",
			u:    character.ProfileUpdate{Entity: "  Alice  ", Kind: "player", SeenAt: day(10), RelationshipDelta: map[string]float64{"trust": 0.4}},
			want: character.Profile{Entity: "alice", Name: "Alice", Kind: "player", Mentions: 1, FirstSeen: day(10), LastSeen: day(10),
				Relationship: store.NewJSON(map[string]float64{"trust": 0.4})},
		},
		{
			name: "deltas add up and clamp at 1",
			u:    character.ProfileUpdate{Entity: "ALICE", RelationshipDelta: map[string]float64{"trust": 0.9, "fear": -0.25}},
			want: character.Profile{Entity: "alice", Name: "Alice", Kind: "player", Mentions: 1, FirstSeen: day(10), LastSeen: day(10),
				Relationship: store.NewJSON(map[string]float64{"trust": 1, "fear": -0.25})},
		},
		{
			name: "clamp at -1",
			u:    character.ProfileUpdate{Entity: "alice", RelationshipDelta: map[string]float64{"trust": -5, "fear": -0.75}},
			want: character.Profile{Entity: "alice", Name: "Alice", Kind: "player", Mentions: 1, FirstSeen: day(10), LastSeen: day(10),
				Relationship: store.NewJSON(map[string]float64{"trust": -1, "fear": -1})},
		},
		{
			name: "a later sighting moves last seen",
			u:    character.ProfileUpdate{Entity: "alice", Description: "a tall smith's apprentice", SeenAt: day(12)},
			want: character.Profile{Entity: "alice", Name: "Alice", Kind: "player", Description: "a tall smith's apprentice", Mentions: 2,
				FirstSeen: day(10), LastSeen: day(12), Relationship: store.NewJSON(map[string]float64{"trust": -1, "fear": -1})},
		},
		{
			name: "an earlier sighting counts but keeps last seen",
			u:    character.ProfileUpdate{Entity: "alice", Name: "Alice of Oakvale", SeenAt: day(11)},
			want: character.Profile{Entity: "alice", Name: "Alice of Oakvale", Kind: "player", Description: "a tall smith's apprentice", Mentions: 3,
				FirstSeen: day(10), LastSeen: day(12), Relationship: store.NewJSON(map[string]float64{"trust": -1, "fear": -1})},
		},
		{
			name: "empty fields leave the profile alone",
			u:    character.ProfileUpdate{Entity: "alice"},
			want: character.Profile{Entity: "alice", Name: "Alice of Oakvale", Kind: "player", Description: "a tall smith's apprentice", Mentions: 3,
				FirstSeen: day(10), LastSeen: day(12), Relationship: store.NewJSON(map[string]float64{"trust": -1, "fear": -1})},
		},
	}
	pick := func(p character.Profile) character.Profile {
		return character.Profile{Entity: p.Entity, Name: p.Name, Kind: p.Kind, Description: p.Description, Mentions: p.Mentions,
			FirstSeen: p.FirstSeen, LastSeen: p.LastSeen, Relationship: p.Relationship}
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			p, err := s.UpsertProfile(ctx, "brom", st.u)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(st.want, pick(*p)); diff != "" {
				t.Errorf("returned profile (-want +got):\n%s", diff)
			}
			stored, err := s.Profiles(ctx, "brom", "alice")
			if err != nil || len(stored) != 1 {
				t.Fatalf("Profiles = %d, %v", len(stored), err)
			}
			if diff := cmp.Diff(st.want, pick(stored[0])); diff != "" {
				t.Errorf("stored profile (-want +got):\n%s", diff)
			}
		})
	}

	// Without a sighting a new profile is first and last seen now.
	p, err := s.UpsertProfile(ctx, "brom", character.ProfileUpdate{Entity: "The Guild", Kind: "faction"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Entity != "the guild" || p.Mentions != 0 || p.FirstSeen.IsZero() || !p.FirstSeen.Equal(p.LastSeen) {
		t.Errorf("profile without sighting = %+v", p)
	}

	long := strings.Repeat("é", 1500) // 3000 bytes
	p, err = s.UpsertProfile(ctx, "brom", character.ProfileUpdate{Entity: "bob", Description: long})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Description) > 2000 || !strings.HasPrefix(long, p.Description) || len(p.Description) < 1998 {
		t.Errorf("long description cut to %d bytes, want up to 2000 on a rune boundary", len(p.Description))
	}

	var fe *character.FieldError
	if _, err := s.UpsertProfile(ctx, "brom", character.ProfileUpdate{Entity: "   "}); !errors.As(err, &fe) || fe.Field != "entity" {
		t.Errorf("UpsertProfile without an entity = %v, want a FieldError on entity", err)
	}
}

func TestAddFact(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	t1 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	t2 := t1.Add(24 * time.Hour)

	first, action, err := s.AddFact(ctx, "brom", character.Fact{Entity: "Alice", Key: " Sword ", Content: "lost her sword at the forge", Source: "tool", ValidFrom: t1,
		Sources: store.NewJSON(character.Sources{EventRefs: []string{"evt-1"}})})
	if err != nil || action != character.FactAdded {
		t.Fatalf("first AddFact = %v, %v; want added", action, err)
	}
	if first.ID == 0 || first.Entity != "alice" || first.Key != "sword" || first.CharacterID != "brom" {
		t.Errorf("first fact = %+v", first)
	}

	// The profile exists now, even though nobody created it.
	ps, err := s.Profiles(ctx, "brom")
	if err != nil || len(ps) != 1 || ps[0].Entity != "alice" {
		t.Fatalf("Profiles after AddFact = %+v, %v", ps, err)
	}

	dup, action, err := s.AddFact(ctx, "brom", character.Fact{Entity: "alice", Content: "  LOST HER SWORD AT THE FORGE "})
	if err != nil || action != character.FactSkipped || dup.ID != first.ID {
		t.Errorf("duplicate AddFact = %v (id %d), %v; want skipped, returning #%d", action, dup.ID, err, first.ID)
	}

	free, action, err := s.AddFact(ctx, "brom", character.Fact{Entity: "alice", Content: "is left-handed", ValidFrom: t1})
	if err != nil || action != character.FactAdded {
		t.Fatalf("keyless AddFact = %v, %v; want added", action, err)
	}

	second, action, err := s.AddFact(ctx, "brom", character.Fact{Entity: "alice", Key: "SWORD", Content: "found her sword under the anvil", ValidFrom: t2})
	if err != nil || action != character.FactSuperseded {
		t.Fatalf("same-key AddFact = %v, %v; want superseded", action, err)
	}

	all, err := s.Facts(ctx, "brom", "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{first.ID, free.ID, second.ID}, factIDs(all)); diff != "" {
		t.Fatalf("all facts (-want +got):\n%s", diff)
	}
	old := all[0]
	if old.SupersededAt == nil || !old.SupersededAt.Equal(t2) || old.SupersededBy == nil || *old.SupersededBy != second.ID {
		t.Errorf("old fact superseded_at %v by %v, want %v by #%d", old.SupersededAt, old.SupersededBy, t2, second.ID)
	}
	if old.Content != "lost her sword at the forge" || !old.ValidFrom.Equal(t1) {
		t.Errorf("old fact changed: %+v", old)
	}
	if diff := cmp.Diff([]string{"evt-1"}, old.Sources.V.EventRefs); diff != "" {
		t.Errorf("old fact sources (-want +got):\n%s", diff)
	}
	if all[1].SupersededAt != nil {
		t.Errorf("a keyless fact was superseded")
	}

	current, err := s.Facts(ctx, "brom", "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{free.ID, second.ID}, factIDs(current)); diff != "" {
		t.Errorf("current facts (-want +got):\n%s", diff)
	}

	// Restating a superseded belief makes it current again as a new fact.
	again, action, err := s.AddFact(ctx, "brom", character.Fact{Entity: "alice", Key: "sword", Content: "lost her sword at the forge"})
	if err != nil || action != character.FactSuperseded || again.ID == first.ID {
		t.Errorf("restated old belief = %v (#%d), %v; want a new fact superseding #%d", action, again.ID, err, second.ID)
	}

	var fe *character.FieldError
	for _, f := range []character.Fact{{Entity: "", Content: "x"}, {Entity: "alice", Content: "   "}} {
		if _, _, err := s.AddFact(ctx, "brom", f); !errors.As(err, &fe) {
			t.Errorf("AddFact(%+v) = %v, want a FieldError", f, err)
		}
	}
}

func factIDs(fs []character.Fact) []int64 {
	out := []int64{}
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

func TestProfilesCurrentAndAllFacts(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	add := func(npc, entity, key, content string) *character.Fact {
		t.Helper()
		f, _, err := s.AddFact(ctx, npc, character.Fact{Entity: entity, Key: key, Content: content, ValidFrom: at})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	oldHome := add("brom", "alice", "home", "lives in Oakvale")
	newHome := add("brom", "alice", "home", "moved to Riverton")
	bob := add("brom", "bob", "", "owes me 5 gold")
	add("mara", "alice", "", "mara's own belief")
	if _, err := s.UpsertProfile(ctx, "brom", character.ProfileUpdate{Entity: "carol"}); err != nil {
		t.Fatal(err)
	}

	type view struct {
		Entity string
		Facts  []int64
	}
	summarize := func(ps []character.Profile) []view {
		var out []view
		for _, p := range ps {
			out = append(out, view{p.Entity, factIDs(p.Facts)})
		}
		return out
	}
	tests := []struct {
		name     string
		entities []string
		want     []view
	}{
		{"every profile with every fact", nil, []view{{"alice", []int64{oldHome.ID, newHome.ID}}, {"bob", []int64{bob.ID}}, {"carol", []int64{}}}},
		{"named profiles with current facts", []string{"Alice", "carol", "nobody"}, []view{{"alice", []int64{newHome.ID}}, {"carol", []int64{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := s.Profiles(ctx, "brom", tt.entities...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(ps)); diff != "" {
				t.Errorf("Profiles(%v) (-want +got):\n%s", tt.entities, diff)
			}
		})
	}
	all, err := s.Facts(ctx, "brom", "", false)
	if err != nil || len(all) != 3 {
		t.Errorf("Facts of every entity = %d, %v; want 3", len(all), err)
	}
}

func TestSupersedeFact(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	a, _, _ := s.AddFact(ctx, "brom", character.Fact{Entity: "alice", Content: "is a smith"})
	b, _, _ := s.AddFact(ctx, "brom", character.Fact{Entity: "alice", Content: "is a baker"})
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.FixedZone("X", 7200))
	if err := s.SupersedeFact(ctx, "brom", a.ID, b.ID, at); err != nil {
		t.Fatal(err)
	}
	// A second supersession of the same fact does not move its date.
	if err := s.SupersedeFact(ctx, "brom", a.ID, b.ID, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	fs, err := s.Facts(ctx, "brom", "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	if fs[0].SupersededAt == nil || !fs[0].SupersededAt.Equal(at) || *fs[0].SupersededBy != b.ID {
		t.Errorf("superseded fact: at %v by %v, want %v by #%d", fs[0].SupersededAt, fs[0].SupersededBy, at, b.ID)
	}
	current, _ := s.Facts(ctx, "brom", "alice", true)
	if diff := cmp.Diff([]int64{b.ID}, factIDs(current)); diff != "" {
		t.Errorf("current facts (-want +got):\n%s", diff)
	}
}

func TestEntityKey(t *testing.T) {
	for in, want := range map[string]string{
		"Alice":                  "alice",
		"  Old   Tom\tBombadil ": "old tom bombadil",
		"":                       "",
		"   ":                    "",
	} {
		if got := character.EntityKey(in); got != want {
			t.Errorf("EntityKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNoteSeenIsUpsertWithSeenAt checks that NoteSeen leaves a profile as
// UpsertProfile with only Entity and SeenAt would, over sightings later,
// earlier, within the same second and on a new profile.
func TestNoteSeenIsUpsertWithSeenAt(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	sightings := []struct {
		entity, name string
		at           time.Time
	}{
		{"Alice", "", at},
		{"alice", "", at.Add(90 * time.Minute)},
		{"ALICE", "", at.Add(30 * time.Minute)},                      // earlier: counted, last seen kept
		{"alice", "", at.Add(90*time.Minute + 500*time.Millisecond)}, // later within the second
		{"alice", "", at.Add(90*time.Minute + 250*time.Millisecond)},
		{"Bob the Tall", "", at.Add(24 * time.Hour)},
		{"alice", "", at.Add(400 * 24 * time.Hour)},
		{character.ActorKey("p-7"), "Carol", at.Add(time.Hour)},
		{character.ActorKey("p-7"), "Carolyn", at.Add(2 * time.Hour)}, // renamed: one profile, the new name
		{"carolyn", "", at.Add(3 * time.Hour)},                        // the name resolves to the actor seen under it
	}
	for i, v := range sightings {
		// Alone, and as a tick notes it inside its transaction (where
		// SQLite runs a prepared statement).
		var err error
		if i%2 == 0 {
			err = s.NoteSeen(ctx, "brom", v.entity, v.name, v.at)
		} else {
			err = s.DB().Transaction(func(tx *gorm.DB) error { return s.WithTx(tx).NoteSeen(ctx, "brom", v.entity, v.name, v.at) })
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpsertProfile(ctx, "mara", character.ProfileUpdate{Entity: v.entity, Name: v.name, SeenAt: v.at}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Profiles(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.Profiles(ctx, "mara")
		if err != nil {
			t.Fatal(err)
		}
		ignore := cmp.FilterPath(func(p cmp.Path) bool {
			switch p.Last().String() {
			case ".ID", ".CharacterID", ".UpdatedAt":
				return true
			}
			return false
		}, cmp.Ignore())
		if diff := cmp.Diff(want, got, ignore); diff != "" {
			t.Fatalf("after %s seen at %s (-UpsertProfile +NoteSeen):\n%s", v.entity, v.at, diff)
		}
	}
}

// AddFacts records a batch as AddFact would one fact after the other: a
// fact may supersede or repeat one of the same batch, names resolve to the
// game actor seen under them, and a profile is made for each new entity.
func TestAddFactsIsAddFactInTurn(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	t1 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	t2, t3 := t1.Add(time.Hour), t1.Add(2*time.Hour)
	old, _, err := s.AddFact(ctx, "brom", character.Fact{Entity: "alice", Key: "sword", Content: "has a sword", ValidFrom: t1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.NoteSeen(ctx, "brom", character.ActorKey("42"), "Dave", t1); err != nil {
		t.Fatal(err)
	}
	got, actions, err := s.AddFacts(ctx, "brom",
		character.Fact{Entity: "Alice", Key: "sword", Content: "sold her sword", ValidFrom: t2},
		character.Fact{Entity: "alice", Content: "SOLD HER SWORD"},
		character.Fact{Entity: "alice", Key: "sword", Content: "has a sword", ValidFrom: t3},
		character.Fact{Entity: "Carol", Content: "bakes bread", ValidFrom: t2},
		character.Fact{Entity: "dave", Content: "owes 3 gold", ValidFrom: t2},
	)
	if err != nil {
		t.Fatal(err)
	}
	wantActions := []character.FactAction{character.FactSuperseded, character.FactSkipped, character.FactSuperseded, character.FactAdded, character.FactAdded}
	if diff := cmp.Diff(wantActions, actions); diff != "" {
		t.Fatalf("actions (-want +got):\n%s", diff)
	}
	if got[1].ID != got[0].ID || got[0].ID == 0 {
		t.Errorf("the repeated fact is #%d, want the one it repeats, #%d", got[1].ID, got[0].ID)
	}
	if got[4].Entity != character.ActorKey("42") {
		t.Errorf("a fact about dave went to %q, want the actor seen as Dave", got[4].Entity)
	}
	all, err := s.Facts(ctx, "brom", "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{old.ID, got[0].ID, got[2].ID}, factIDs(all)); diff != "" {
		t.Fatalf("alice's facts (-want +got):\n%s", diff)
	}
	for i, w := range []struct {
		by *int64
		at time.Time
	}{{&got[0].ID, t2}, {&got[2].ID, t3}, {nil, time.Time{}}} {
		f := all[i]
		if (w.by == nil) != (f.SupersededBy == nil) || w.by != nil && (*f.SupersededBy != *w.by || !f.SupersededAt.Equal(w.at)) {
			t.Errorf("fact %q superseded by %v at %v, want by %v at %v", f.Content, f.SupersededBy, f.SupersededAt, w.by, w.at)
		}
	}
	ps, err := s.Profiles(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	var entities []string
	for _, p := range ps {
		entities = append(entities, p.Entity)
	}
	if diff := cmp.Diff([]string{character.ActorKey("42"), "alice", "carol"}, entities); diff != "" {
		t.Errorf("profiles (-want +got):\n%s", diff)
	}
	// One bad fact records none of its batch.
	var fe *character.FieldError
	if _, _, err := s.AddFacts(ctx, "brom", character.Fact{Entity: "erin", Content: "x"}, character.Fact{Entity: "erin", Content: " "}); !errors.As(err, &fe) {
		t.Fatalf("batch with an empty fact: %v, want a FieldError", err)
	}
	if fs, _ := s.Facts(ctx, "brom", "erin", false); len(fs) != 0 {
		t.Errorf("the refused batch stored %d facts", len(fs))
	}
}

// A name seen alone resolves to the profile of the game actor most
// recently seen under it, whatever the case, through the index of the
// actors' names (migration character v12): the index follows a rename
// by a sighting and by UpsertProfile, prefers an actor to a profile keyed
// by the name, and serves a fact's entity as it serves a sighting.
func TestActorNamesFollowRenames(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	seen := func(entity, name string, h int) {
		t.Helper()
		// Alone, and inside a transaction (SQLite's prepared statement).
		var err error
		if h%2 == 0 {
			err = s.NoteSeen(ctx, "brom", entity, name, at.Add(time.Duration(h)*time.Hour))
		} else {
			err = s.DB().Transaction(func(tx *gorm.DB) error {
				return s.WithTx(tx).NoteSeen(ctx, "brom", entity, name, at.Add(time.Duration(h)*time.Hour))
			})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	mentions := func(want map[string]int) {
		t.Helper()
		ps, err := s.Profiles(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, p := range ps {
			got[p.Entity] = p.Mentions
		}
		if !maps.Equal(got, want) {
			t.Fatalf("mentions by profile %v, want %v", got, want)
		}
	}
	seen("carl", "", 0) // a profile keyed by the name
	seen(character.ActorKey("a2"), "Bob", 1)
	seen(character.ActorKey("a1"), "Bob", 2)
	seen("BOB", "", 3) // a1, seen last under the name
	mentions(map[string]int{"carl": 1, "@a2": 1, "@a1": 2})
	seen(character.ActorKey("a1"), "Robert", 4) // renamed by a sighting
	seen("bob", "", 5)                          // the only Bob left
	seen("robert", "", 6)
	mentions(map[string]int{"carl": 1, "@a2": 2, "@a1": 4})
	if _, err := s.UpsertProfile(ctx, "brom", character.ProfileUpdate{Entity: "@a2", Name: "Bobby"}); err != nil {
		t.Fatal(err)
	}
	seen("bob", "", 7) // no actor is Bob now: the name's own profile
	seen(character.ActorKey("a3"), "Carl", 8)
	seen("Carl", "", 9) // an actor under the name comes first
	mentions(map[string]int{"carl": 1, "@a2": 2, "@a1": 4, "bob": 1, "@a3": 2})
	fs, _, err := s.AddFacts(ctx, "brom", character.Fact{Entity: "bobby", Content: "sells eels", Source: "tool"},
		character.Fact{Entity: "robert", Content: "owes 5 gold", Source: "tool"})
	if err != nil {
		t.Fatal(err)
	}
	if fs[0].Entity != "@a2" || fs[1].Entity != "@a1" {
		t.Fatalf("facts about bobby and robert went to %q and %q, want @a2 and @a1", fs[0].Entity, fs[1].Entity)
	}
	if !store.IsSQLite(s.DB()) {
		return
	}
	var plan []struct{ Detail string }
	if err := s.DB().Raw("EXPLAIN QUERY PLAN SELECT `entity` FROM `profiles` WHERE character_id = ? AND name_key = ? ORDER BY last_seen DESC LIMIT 1", "brom", "bob").Scan(&plan).Error; err != nil {
		t.Fatal(err)
	}
	if len(plan) == 0 || !strings.Contains(plan[0].Detail, "idx_profiles_actor_name") {
		t.Errorf("the actors under a name are found by %+v, want idx_profiles_actor_name", plan)
	}
}

// Migration character v12 indexes the names of the actors' profiles
// written before it: a name seen alone then finds them.
func TestActorNamesIndexedByTheMigration(t *testing.T) {
	ctx := context.Background()
	all := character.Migrations()
	db := migratedDB(t, all[:len(all)-1])
	s := character.NewStore(db)
	putNPC(t, s, "brom")
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	if err := db.Exec("INSERT INTO profiles (character_id, entity, name, mentions, first_seen, last_seen, updated_at) VALUES (?, ?, ?, 1, ?, ?, ?)",
		"brom", character.ActorKey("a1"), "Bob", at, at, at).Error; err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, db, all); err != nil {
		t.Fatal(err)
	}
	if err := s.NoteSeen(ctx, "brom", "bob", "", at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ps, err := s.Profiles(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Entity != "@a1" || ps[0].Mentions != 2 {
		t.Fatalf("profiles %+v, want the actor's seen twice", ps)
	}
}
