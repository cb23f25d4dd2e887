package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// testEnv is a real SQLite database in a temporary directory with the
// schema of character and journal.
type testEnv struct {
	db    *gorm.DB
	chars *character.Store
	jour  *Store
}

func newEnv(tb testing.TB) *testEnv {
	tb.Helper()
	ctx := context.Background()
	db := dbtest.Open(tb)
	if err := store.Migrate(ctx, db, append(character.Migrations(), Migrations()...)); err != nil {
		tb.Fatal(err)
	}
	return &testEnv{db: db, chars: character.NewStore(db), jour: NewStore(db)}
}

// npc creates an NPC whose game clock reads now.
func (e *testEnv) npc(tb testing.TB, id string, now time.Time) {
	tb.Helper()
	ctx := context.Background()
	if _, err := e.chars.Put(ctx, &character.Character{ID: id, Name: id, Persona: "p", ContextWindow: 8192}); err != nil {
		tb.Fatal(err)
	}
	if err := e.chars.UpdateState(ctx, id, map[string]any{"game_time": now.UTC()}); err != nil {
		tb.Fatal(err)
	}
}

// say appends perceived messages, one per text, each citing the event ref
// of the same index, and returns their ids.
func (e *testEnv) say(tb testing.TB, npc string, at time.Time, texts []string, refs []string) []int64 {
	tb.Helper()
	msgs := make([]*character.Message, len(texts))
	for i, t := range texts {
		msgs[i] = &character.Message{Role: llm.RoleUser, Content: t, GameTime: at, Turn: int64(i + 1)}
		if i < len(refs) {
			msgs[i].EventRefs = store.NewJSON([]string{refs[i]})
		}
	}
	if err := e.chars.AppendMessages(context.Background(), npc, msgs, llm.NewCounter(""), 0); err != nil {
		tb.Fatal(err)
	}
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

func (e *testEnv) retriever(tb testing.TB, opts ...Option) *Retriever {
	tb.Helper()
	r, err := NewRetriever(e.jour, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// all decodes l's postings, oldest first; none for a nil list.
func (l *postList) all() []posting {
	if l == nil {
		return nil
	}
	var out []posting
	for c := l.cursor(); c.more(); {
		out = append(out, c.take())
	}
	return out
}

// take reads the next posting as keywordInto does: short, else read.
func (c *postCursor) take() posting {
	if e, ok := c.short(); ok {
		return e
	}
	return c.read()
}

// chatter returns n perceived lines of random words, none of which is a
// word of the planted fact.
func chatter(rng *rand.Rand, n int) []string {
	words := []string{"sword", "forge", "alice", "gold", "owes", "ale", "inn", "wolves", "north", "road", "mill", "night", "blade",
		"silver", "horse", "cart", "bread", "baker", "guard", "captain", "river", "bridge", "toll", "coin", "debt"}
	texts := make([]string, n)
	for i := range texts {
		var b strings.Builder
		fmt.Fprintf(&b, "[2026-11-21 10:%02d] npc%d says: \"", i%60, rng.IntN(300))
		for range 12 + rng.IntN(20) {
			fmt.Fprintf(&b, "%s%d ", words[rng.IntN(len(words))], rng.IntN(50))
		}
		texts[i] = b.String() + "\""
	}
	return texts
}

// chattyNPC returns a new environment whose NPC "a" has perceived n
// thousand lines of chatter, and the random source that made them (seeded
// with seed and seed+1).
func chattyNPC(t *testing.T, seed uint64, n int) (*testEnv, *rand.Rand) {
	t.Helper()
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	e.npc(t, "a", t0)
	for range n {
		e.say(t, "a", t0, chatter(rng, 1000), nil)
	}
	return e, rng
}
