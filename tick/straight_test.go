package tick

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTickReportsTheNPCAsStored checks that the context a tick reports,
// taken from its commit without reading the NPC again, is the stored one,
// through emergency compactions too.
func TestTickReportsTheNPCAsStored(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	c := brom()
	c.ContextWindow = 3072
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	compacted := 0
	for i := 0; i < 40; i++ {
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: fmt.Sprintf("Round %d: the north road is long and the wolves are hungry this winter, have you seen my sword?", i)}}); err != nil {
			t.Fatal(err)
		}
		res, err := env.eng.Tick(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		if res.Compaction != nil {
			compacted++
		}
		stored, err := env.chars.Get(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ContextOf(stored), res.Context); diff != "" {
			t.Fatalf("tick %d reported the context unlike it is stored (-stored +reported):\n%s", i, diff)
		}
		if diff := cmp.Diff(Warnings(stored), res.Warnings); diff != "" {
			t.Fatalf("tick %d reported warnings unlike the stored NPC's (-stored +reported):\n%s", i, diff)
		}
	}
	if compacted == 0 {
		t.Fatal("no tick compacted: the test does not cover the compaction path")
	}
}
