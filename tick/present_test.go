package tick

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// presentChecker checks, at each tick's model call, that the profile lines
// the working context shows are those a fresh read of the profiles gives
// (presentLines without a revision), and counts the calls that showed some.
type presentChecker struct {
	t     *testing.T
	env   *testEnv
	model llm.Chatter
	shown int
}

func (p *presentChecker) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if req.Task == llm.TaskTick {
		c, err := p.env.chars.Get(ctx, "brom")
		if err != nil {
			p.t.Error(err)
		}
		evs, err := p.env.chars.PendingEvents(ctx, "brom", 10)
		if err != nil {
			p.t.Error(err)
		}
		want, err := p.env.eng.presentLines(ctx, "brom", entitiesIn(evs, c.Name), nil)
		if err != nil {
			p.t.Error(err)
		}
		got := presentIn(req.Messages)
		if !slices.Equal(got, want) {
			p.t.Errorf("present lines shown:\n%s\nwant, as the profiles read now:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(got) > 0 {
			p.shown++
		}
	}
	return p.model.Chat(ctx, req)
}

// presentIn returns the lines under PresentHeader of the working context
// in msgs (up to the next header or blank line).
func presentIn(msgs []llm.Message) []string {
	for _, m := range msgs {
		if !strings.HasPrefix(m.Content, WorkingContextHeader) {
			continue
		}
		var out []string
		in := false
		for l := range strings.SplitSeq(m.Content, "\n") {
			switch {
			case l == PresentHeader:
				in = true
			case strings.HasPrefix(l, "## "), l == "":
				in = false
			case in:
				out = append(out, l)
			}
		}
		return out
	}
	return nil
}

// The profile lines of those present are read once and shown again while
// the NPC's profile revision stands, and read again after each change of
// what they show, through every path: a description, a feeling, a fact, a
// superseding fact, a new display name, a sighting on a new day, a profile
// first made, all made beside the ticks. Each tick's lines are those a
// fresh read gives.
func TestPresentLinesKeptUntilTheyChange(t *testing.T) {
	var pc *presentChecker
	env := openEnvDeps(t, filepath.Join(t.TempDir(), "npcd.db"), nil, 0, func(d *Deps) {
		pc = &presentChecker{t: t, model: d.Builtin}
		d.Builtin = pc
	})
	pc.env = env
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	at := day
	tick := func(what string, evs ...EventInput) {
		t.Helper()
		for i := range evs {
			at = at.Add(time.Minute)
			evs[i].Kind, evs[i].At = "say", at
		}
		if _, _, err := env.eng.PostEvents(ctx, "brom", evs); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if _, err := env.eng.Tick(ctx, "brom"); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// Only a glance that reads the revision (SQLite) lets the lines be
	// kept; elsewhere every tick reads them, and shows what it read.
	kept := store.IsSQLite(env.chars.DB())
	reads := func() int64 {
		env.eng.present.mu.Lock()
		defer env.eng.present.mu.Unlock()
		return env.eng.present.reads
	}
	alice := EventInput{Actor: "alice", Text: "Have you seen my sword?"}
	bob := EventInput{ActorID: "p-7", ActorName: "Bob", Text: "Good morning."}
	// The first tick makes both profiles (their first sighting, after the
	// working context is built); the second reads them; those after keep
	// them.
	tick("first", alice, bob)
	tick("second", alice, bob)
	base := reads()
	for i := range 3 {
		tick("unchanged", alice, bob)
		if n := reads(); kept && n != base {
			t.Fatalf("unchanged tick %d read the profiles again (%d reads, %d before)", i, n, base)
		}
	}
	changes := []struct {
		what string
		f    func() error
		evs  []EventInput
	}{
		{"a description", func() error {
			_, err := env.chars.UpsertProfile(ctx, "brom", character.ProfileUpdate{Entity: "alice", Kind: "player", Description: "a smith's apprentice"})
			return err
		}, []EventInput{alice, bob}},
		{"a feeling", func() error {
			_, err := env.chars.UpsertProfile(ctx, "brom", character.ProfileUpdate{Entity: "alice", RelationshipDelta: map[string]float64{"trust": 0.5}})
			return err
		}, []EventInput{alice}},
		{"a fact", func() error {
			_, _, err := env.chars.AddFact(ctx, "brom", character.Fact{Entity: "alice", Key: "sword", Content: "lost her sword at the forge", Source: "tool"})
			return err
		}, []EventInput{alice, bob}},
		{"a superseding fact", func() error {
			_, _, err := env.chars.AddFact(ctx, "brom", character.Fact{Entity: "alice", Key: "sword", Content: "found her sword in the well", Source: "tool"})
			return err
		}, []EventInput{alice}},
		{"a new display name", func() error { return nil }, []EventInput{{ActorID: "p-7", ActorName: "Robert", Text: "Call me Robert."}, alice}},
		{"a new day", func() error { at = at.Add(24 * time.Hour); return nil }, []EventInput{alice}},
		{"a profile first made", func() error {
			_, err := env.chars.UpsertProfile(ctx, "brom", character.ProfileUpdate{Entity: "carol", Kind: "player", Description: "the miller"})
			return err
		}, []EventInput{alice, {Actor: "carol", Text: "Flour for sale."}}},
	}
	for _, ch := range changes {
		if err := ch.f(); err != nil {
			t.Fatalf("%s: %v", ch.what, err)
		}
		before := reads()
		tick(ch.what, ch.evs...)
		// A sighting that changes what is shown (a new name, a new day)
		// shows itself at the tick after the one that saw it.
		tick(ch.what+", the tick after", ch.evs...)
		if kept && reads() == before {
			t.Fatalf("%s: the profiles were not read again", ch.what)
		}
		settled := reads()
		tick(ch.what+", settled", ch.evs...)
		if n := reads(); kept && n != settled {
			t.Fatalf("%s: a tick with nothing changed read the profiles again (%d reads, %d before)", ch.what, n, settled)
		}
	}
	if !kept && reads() != 0 {
		t.Fatalf("%d ticks kept lines without a revision", reads())
	}
	if pc.shown < 20 {
		t.Fatalf("%d ticks showed present lines, want every one but the first", pc.shown)
	}
}

// The kept profile lines stay within the cache's bound in bytes
// (Config.ProfileCacheBytes): however many NPCs' lines pass through, the
// two generations hold at most the bound, counting each line's strings
// and what an entry costs beside them, and lines seen again and again stay.
func TestPresentCacheStaysWithinItsBytes(t *testing.T) {
	const bound = 64 << 10
	p := newPresentCache(bound)
	line := strings.Repeat("a tall smith who owes Brom 3 silver; ", 8) // 296 bytes
	size := presentSize("npc-0000", "alice", line)
	for i := range 2000 {
		id := fmt.Sprintf("npc-%04d", i)
		p.keep(id, []string{"alice"}, map[string]string{"alice": line}, 1)
		if i%10 == 0 {
			if got, ok := p.lines("npc-0000", []string{"alice"}, 1); !ok || len(got) != 1 {
				t.Fatalf("after %d NPCs the line seen every tenth is gone", i+1)
			}
		}
		newer, older := p.c.Len()
		if held := (newer + older) * size; held > bound {
			t.Fatalf("after %d NPCs the cache holds %d entries of %d bytes, %d in all, over its bound of %d", i+1, newer+older, size, held, bound)
		}
	}
	if _, ok := p.lines("npc-0001", []string{"alice"}, 1); ok {
		t.Fatal("a line kept once, 2,000 NPCs ago, is still held")
	}
	// A line over presentMaxLine is never kept: it is read each time.
	p.keep("npc-long", []string{"bob"}, map[string]string{"bob": strings.Repeat("x", presentMaxLine+1)}, 1)
	if _, ok := p.lines("npc-long", []string{"bob"}, 1); ok {
		t.Fatal("a line over presentMaxLine was kept")
	}
}

// The engine's cache has the bound its config gives (default
// DefaultProfileCacheBytes), half of it a generation, and a negative one is
// refused.
func TestProfileCacheBytesSetting(t *testing.T) {
	env := openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), nil)
	if got := env.eng.present.c.Bound(); got != DefaultProfileCacheBytes/2 {
		t.Fatalf("default engine: generations of %d bytes, want %d", got, DefaultProfileCacheBytes/2)
	}
	eng, err := New(env.eng.deps, Config{ProfileCacheBytes: 3 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	if got := eng.present.c.Bound(); got != 3<<19 {
		t.Fatalf("ProfileCacheBytes 3 MiB: generations of %d bytes, want %d", got, 3<<19)
	}
	var c Config
	c.applyDefaults()
	c.ProfileCacheBytes = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "ProfileCacheBytes") {
		t.Fatalf("ProfileCacheBytes -1: %v, want an error naming it", err)
	}
}
