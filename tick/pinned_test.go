package tick

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
)

// pinningEnv is an engine with brom, whose small window compacts soon.
func pinningEnv(t *testing.T) *testEnv {
	t.Helper()
	env := newEnv(t)
	c := brom()
	c.ContextWindow, c.MaxOutputTokens = 2048, 192
	if _, err := env.eng.PutNPC(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return env
}

// planOf plans a compaction of brom as he is now.
func planOf(t *testing.T, env *testEnv) *sleep.Plan {
	t.Helper()
	ctx := context.Background()
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	p, err := env.eng.deps.Compactor.(*sleep.Compactor).Plan(ctx, c, sleep.TriggerManual, "")
	if err != nil || p.Empty() {
		t.Fatalf("plan: %d messages to compact, %v", len(p.Span), err)
	}
	return p
}

// pinnedOf returns the pinned lines of plan p, one text.
func pinnedOf(t *testing.T, env *testEnv, p *sleep.Plan) string {
	t.Helper()
	pinned, err := env.eng.deps.Compactor.(*sleep.Compactor).Pinned(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(pinned, "\n")
}

// A compaction pins the notable journal entries of its span, read from
// those citing its oldest message or a newer one, and none of a span
// already compacted.
func TestCompactionPinsTheNotableEntriesOfItsSpan(t *testing.T) {
	env := pinningEnv(t)
	ctx := context.Background()
	debt := "I owe you 500 gold crowns, Brom, and I swear I will pay them back before the harvest festival."
	say(t, env, "alice", debt)
	for i := 0; i < 6; i++ {
		say(t, env, "alice", fmt.Sprintf("Round %d: the north road is quiet.", i))
	}
	es, err := env.jour.List(ctx, "brom", journal.ListQuery{MinImportance: sleep.PinImportance})
	if err != nil || len(es) == 0 {
		t.Fatalf("the debt was not journaled as notable (%v): the test pins nothing", err)
	}
	if got := pinnedOf(t, env, planOf(t, env)); !strings.Contains(got, "500 gold crowns") {
		t.Fatalf("pinned lines %q lack the debt", got)
	}
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.eng.deps.Compactor.Compact(ctx, c, sleep.TriggerManual, ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		say(t, env, "alice", fmt.Sprintf("Round %d: the south road is quiet.", i))
	}
	if got := pinnedOf(t, env, planOf(t, env)); strings.Contains(got, "500 gold crowns") {
		t.Fatalf("the next compaction pins the debt of a span already compacted: %q", got)
	}
}

// An entry citing a message of the span is pinned whenever it was written
// and whatever clock stamped it: here one stamped an hour before the span
// began (a daemon whose clock is behind) and one written after many
// others. An entry citing only a message before the span is not.
func TestPinnedEntriesAreFoundByTheMessagesTheyCite(t *testing.T) {
	env := pinningEnv(t)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		say(t, env, "alice", fmt.Sprintf("Round %d: the north road is quiet.", i))
	}
	p := planOf(t, env)
	if len(p.Span) < 2 {
		t.Fatalf("plan: %d messages to compact, want 2 or more", len(p.Span))
	}
	first, last := p.Span[0], p.Span[len(p.Span)-1]
	note := func(content string, created time.Time, cites int64) {
		t.Helper()
		en := &journal.Entry{Type: journal.TypeNote, Content: content, Importance: 9, CreatedAt: created}
		en.Sources.V.MessageIDs = []int64{cites}
		if err := env.jour.Add(ctx, "brom", en); err != nil {
			t.Fatal(err)
		}
	}
	note("the smuggler's ledger is in the cellar", first.CreatedAt.Add(-time.Hour), first.ID)
	for i := 0; i < 40; i++ {
		note(fmt.Sprintf("an unrelated notable thing %d", i), time.Now(), last.ID+1000)
	}
	note("the mayor owes the guild 300 crowns", time.Now(), last.ID)
	note("an older story", time.Now(), first.ID-1)
	got := pinnedOf(t, env, p)
	for _, want := range []string{"smuggler's ledger", "300 crowns"} {
		if !strings.Contains(got, want) {
			t.Errorf("pinned lines lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "unrelated") || strings.Contains(got, "older story") {
		t.Errorf("pinned lines hold entries citing no message of the span:\n%s", got)
	}
}
