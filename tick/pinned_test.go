package tick

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
)

// A compaction pins the notable journal entries of its span, read from
// those written since the span began, and none of a span already
// compacted.
func TestCompactionPinsTheNotableEntriesOfItsSpan(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	c := brom()
	c.ContextWindow, c.MaxOutputTokens = 2048, 192
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	pinnedOf := func() []string {
		t.Helper()
		c, err := env.chars.Get(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		p, err := env.eng.deps.Compactor.(*sleep.Compactor).Plan(ctx, c, sleep.TriggerManual, "")
		if err != nil || p.Empty() {
			t.Fatalf("plan: %d messages to compact, %v", len(p.Span), err)
		}
		pinned, err := env.eng.deps.Compactor.(*sleep.Compactor).Pinned(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return pinned
	}
	debt := "I owe you 500 gold crowns, Brom, and I swear I will pay them back before the harvest festival."
	say(t, env, "alice", debt)
	for i := 0; i < 6; i++ {
		say(t, env, "alice", fmt.Sprintf("Round %d: the north road is quiet.", i))
	}
	es, err := env.jour.List(ctx, "brom", journal.ListQuery{MinImportance: sleep.PinImportance})
	if err != nil || len(es) == 0 {
		t.Fatalf("the debt was not journaled as notable (%v): the test pins nothing", err)
	}
	if got := strings.Join(pinnedOf(), "\n"); !strings.Contains(got, "500 gold crowns") {
		t.Fatalf("pinned lines %q lack the debt", got)
	}
	c, err = env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.eng.deps.Compactor.Compact(ctx, c, sleep.TriggerManual, ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		say(t, env, "alice", fmt.Sprintf("Round %d: the south road is quiet.", i))
	}
	if got := strings.Join(pinnedOf(), "\n"); strings.Contains(got, "500 gold crowns") {
		t.Fatalf("the next compaction pins the debt of a span already compacted: %q", got)
	}
}
