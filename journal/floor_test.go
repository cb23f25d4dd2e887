package journal

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
)

// An NPC whose index alone outgrows the cache's budget, its vectors
// released, leaves its oldest messages out of it: the index stays within
// the budget as the NPC goes on living, its newest messages are found
// word for word, and what its oldest said is found through its journal.
func TestIndexFloorKeepsOneNPCWithinTheBudget(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	e.npc(t, "a", t0)
	first := e.say(t, "a", t0, []string{"Kestrel says: \"The smuggler hid the amber key under the mill wheel.\""}, nil)[0]
	if err := e.jour.Add(ctx, "a", &Entry{Type: TypeContextSynthesis, Content: "Kestrel told me the smuggler hid the amber key under the mill wheel.", Importance: 7, GameTime: t0}); err != nil {
		t.Fatal(err)
	}
	for range 12 {
		e.say(t, "a", t0, chatter(rng, 1000), nil)
	}
	const query = "where is the amber key the smuggler hid"
	found := func(r *Retriever) (message, entry bool) {
		t.Helper()
		rs, err := r.Search(ctx, "a", query, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range rs {
			message = message || (res.Kind == KindMessage && res.ID == first)
			entry = entry || (res.Kind == KindJournal && strings.Contains(res.Content, "amber key"))
		}
		return message, entry
	}

	// With room for the whole NPC, its first message is found as such.
	if message, _ := found(e.retriever(t, WithCacheBytes(1<<30))); !message {
		t.Fatal("with a budget of 1 GiB, the search did not find the first message")
	}

	const limit = 2 << 20
	var logged bytes.Buffer
	r := e.retriever(t, WithCacheBytes(limit), WithLogger(zerolog.New(&logged).Level(zerolog.InfoLevel)))
	message, entry := found(r)
	if message || !entry {
		t.Fatalf("past its budget, the search found the first message: %v, the journal entry: %v; want false, true", message, entry)
	}
	r.building.Wait()
	st := r.CacheStats()
	if st.Floored != 1 || st.Bytes > limit {
		t.Fatalf("after the first search: %d NPCs floored, index %d bytes; want 1, at most %d", st.Floored, st.Bytes, limit)
	}
	// The build stopped once it outgrew the budget, read the floor that
	// keeps what fits, and started again above it: a build that went on
	// raising the floor chunk by chunk would have started over more often.
	if st.Builds > 2 {
		t.Fatalf("the first search built the index %d times; want at most 2", st.Builds)
	}
	floor := r.floor("a").msg
	if floor <= first {
		t.Fatalf("floor %d, not above the first message %d", floor, first)
	}

	// The NPC goes on living: its index grows past the budget again and
	// its floor rises, and the newest line is found word for word.
	for range 4 {
		e.say(t, "a", t0, chatter(rng, 1000), nil)
		if _, err := r.Search(ctx, "a", "sword forge", 5); err != nil {
			t.Fatal(err)
		}
		r.building.Wait()
		if st := r.CacheStats(); st.Bytes > limit {
			t.Fatalf("the index holds %d bytes, over its budget of %d", st.Bytes, limit)
		}
	}
	if r.floor("a").msg <= floor {
		t.Fatalf("floor %d did not rise from %d as the NPC lived on", r.floor("a").msg, floor)
	}
	// Warned once, though the floor rose more than once.
	if n := strings.Count(logged.String(), "are left out of it"); n != 1 {
		t.Fatalf("%d warnings of a floor, want 1:\n%s", n, logged.String())
	}
	newest := e.say(t, "a", t0, []string{"Wren says: \"The heron statue faces the lighthouse.\""}, nil)[0]
	rs, err := r.Search(ctx, "a", "heron statue lighthouse", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 || rs[0].ID != newest {
		t.Fatalf("the newest message %d is not the first result: %+v", newest, rs)
	}
	if _, entry := found(r); !entry {
		t.Fatal("the journal entry is no longer found")
	}

	// Forgetting the NPC (deleted, or its rows gone) forgets its floor.
	r.Forget("a")
	if st := r.CacheStats(); st.Floored != 0 {
		t.Fatalf("%d NPCs floored after Forget; want 0", st.Floored)
	}
}

// Past its messages, an index leaves its oldest journal entries out, never
// below the newest minFloorRows messages and minFloorEntries entries; and
// an index whose floor can free too little is not built again for it at
// every search.
func TestIndexFloorDropsEntriesAfterMessages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	e.npc(t, "a", t0)
	const n = 1500
	e.say(t, "a", t0, chatter(rng, n), nil)
	entries := make([]*Entry, n)
	for i, text := range chatter(rng, n) {
		entries[i] = &Entry{Type: TypeContextSynthesis, Content: text, Importance: 5, GameTime: t0}
	}
	if err := e.jour.Add(ctx, "a", entries...); err != nil {
		t.Fatal(err)
	}
	measure := e.retriever(t, WithCacheBytes(1<<30))
	if _, err := measure.Search(ctx, "a", "sword forge", 5); err != nil {
		t.Fatal(err)
	}
	r := e.retriever(t, WithCacheBytes(measure.CacheStats().Bytes/3))
	if _, err := r.Search(ctx, "a", "sword forge", 5); err != nil {
		t.Fatal(err)
	}
	// The first search found the index over its budget and floored it;
	// a build beside it put a new one above the floor in its place.
	r.building.Wait()
	f := r.floor("a")
	x, err := r.acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	msgs, ents := len(x.byID[kindMessage]), len(x.byID[kindJournal])
	r.release(x)
	if f.msg == 0 || f.entry == 0 || msgs != minFloorRows || ents != minFloorEntries {
		t.Fatalf("floor %+v, index of %d messages and %d entries; want both floored, to %d and %d", f, msgs, ents, minFloorRows, minFloorEntries)
	}
	if f.entry != entries[n-minFloorEntries-1].ID {
		t.Fatalf("entry floor %d, want %d: the newest %d entries kept", f.entry, entries[n-minFloorEntries-1].ID, minFloorEntries)
	}
	// Still over its budget, it could free only the few messages that
	// come next: it keeps them, and is not built again.
	builds := r.CacheStats().Builds
	for range 3 {
		e.say(t, "a", t0, chatter(rng, 20), nil)
		if _, err := r.Search(ctx, "a", "sword forge", 5); err != nil {
			t.Fatal(err)
		}
		r.building.Wait()
	}
	if got := r.CacheStats().Builds; got != builds || r.floor("a") != f {
		t.Fatalf("after 60 more messages: %d builds (was %d), floor %+v (was %+v); want neither changed", got, builds, r.floor("a"), f)
	}
}

// Searches of a floored NPC running beside its new messages and Forget
// keep the index consistent (run with -race): none fails, and once they
// end the index is within its budget.
func TestIndexFloorUnderConcurrentSearches(t *testing.T) {
	e, rng := chattyNPC(t, 7, 6)
	ctx := context.Background()
	// Room for the newest minFloorRows messages and the rows the index
	// keeps, which it never leaves out: above them it keeps within the
	// budget.
	const limit = 2 << 20
	r := e.retriever(t, WithCacheBytes(limit))
	more := chatter(rng, 3000)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				if _, err := r.Search(ctx, "a", fmt.Sprintf("sword%d forge", (w+i)%50), 5); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 6 {
			msgs := make([]*character.Message, 500)
			for j := range msgs {
				msgs[j] = &character.Message{Role: llm.RoleUser, Content: more[i*500+j], GameTime: t0, Turn: int64(j + 1)}
			}
			if err := e.chars.AppendMessages(ctx, "a", msgs, llm.NewCounter(""), 0); err != nil {
				errs <- err
				return
			}
			if i == 3 {
				r.Forget("a")
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := r.Search(ctx, "a", "sword forge", 5); err != nil {
		t.Fatal(err)
	}
	r.building.Wait()
	if st := r.CacheStats(); st.Floored != 1 || st.Bytes > limit {
		t.Fatalf("%d NPCs floored, index %d bytes; want 1, within %d", st.Floored, st.Bytes, limit)
	}
}

// A floored index is built again beside the one in use: meanwhile the
// NPC's searches go on with the old index, waiting for no build, and the
// new one takes its place once built.
func TestIndexFloorBuildsAgainBeside(t *testing.T) {
	e, rng := chattyNPC(t, 9, 6)
	ctx := context.Background()
	const limit = 1 << 20
	r := e.retriever(t, WithCacheBytes(limit))
	if _, err := r.Search(ctx, "a", "sword forge", 5); err != nil {
		t.Fatal(err)
	}
	r.building.Wait()
	floor := r.floor("a").msg
	cached := func() *npcIndex {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.npcs["a"]
	}
	started, gate := make(chan struct{}, 1), make(chan struct{})
	r.beforeRebuild = func() {
		started <- struct{}{}
		<-gate
	}
	e.say(t, "a", t0, chatter(rng, 2000), nil)
	if _, err := r.Search(ctx, "a", "sword forge", 5); err != nil {
		t.Fatal(err)
	}
	<-started
	old, builds := cached(), r.CacheStats().Builds
	newest := e.say(t, "a", t0, []string{"Wren says: \"The heron statue faces the lighthouse.\""}, nil)[0]
	for range 3 {
		rs, err := r.Search(ctx, "a", "heron statue lighthouse", 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 || rs[0].ID != newest {
			t.Fatalf("while the index is built again: %+v, want the newest message %d first", rs, newest)
		}
	}
	if cached() != old || r.CacheStats().Builds != builds {
		t.Fatal("the searches during the build did not use the index in use")
	}
	close(gate)
	r.building.Wait()
	if cached() == old || r.CacheStats().Builds != builds+1 || r.floor("a").msg <= floor {
		t.Fatalf("after the build: index replaced %v, builds %d (was %d), floor %d (was %d)", cached() != old, r.CacheStats().Builds, builds, r.floor("a").msg, floor)
	}
	rs, err := r.Search(ctx, "a", "heron statue lighthouse", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 || rs[0].ID != newest {
		t.Fatalf("after the build: %+v, want the newest message %d first", rs, newest)
	}
	if st := r.CacheStats(); st.Bytes > limit {
		t.Fatalf("the new index holds %d bytes, over its budget of %d", st.Bytes, limit)
	}
}
