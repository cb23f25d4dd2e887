package tick

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/npcd/npcd/store"
)

// BenchmarkTick measures one full tick of one NPC with the builtin model:
// intake, budget, retrieval, prompt, model, commit.
func BenchmarkTick(b *testing.B) {
	env := newEnv(b)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: fmt.Sprintf("Round %d: have you seen my sword?", i)}}); err != nil {
			b.Fatal(err)
		}
		if _, err := env.eng.Tick(ctx, "brom"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdleTick measures a tick with nothing to answer: it reads the
// NPC and its inbox and returns, calling no model and writing nothing.
func BenchmarkIdleTick(b *testing.B) {
	benchIdle(b, newEnv(b))
}

// benchIdle measures idle ticks of brom on env.
func benchIdle(b *testing.B, env *testEnv) {
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := env.eng.Tick(ctx, "brom")
		if err != nil || !res.Idle {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkTickMany measures ticks of many NPCs at once, as a world runs
// them: each round posts one event to each of 100 NPCs, then ticks them
// all with TickMany. One op is one NPC's tick.
func BenchmarkTickMany(b *testing.B) {
	env := newEnv(b)
	ctx := context.Background()
	const npcs = 100
	ids := make([]string, npcs)
	for i := range ids {
		c := brom()
		c.ID = fmt.Sprintf("brom-%d", i)
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			b.Fatal(err)
		}
		ids[i] = c.ID
	}
	round := func(r int) {
		for _, id := range ids {
			if _, _, err := env.eng.PostEvents(ctx, id, []EventInput{{Kind: "say", Actor: "alice", Text: fmt.Sprintf("Round %d: have you seen my sword, %s?", r, id)}}); err != nil {
				b.Fatal(err)
			}
		}
		res, bad, err := env.eng.TickMany(ctx, ids)
		if err != nil || len(bad) > 0 || len(res) != npcs {
			b.Fatal(len(res), bad, err)
		}
	}
	round(-1) // every NPC's first search loads its past once
	b.ReportAllocs()
	b.ResetTimer()
	for r := 0; r*npcs < b.N; r++ {
		round(r)
	}
}

// BenchmarkIdleTickLeased is BenchmarkIdleTick with the NPC's lease taken
// as a daemon sharing its database does: held, so no query is added.
func BenchmarkIdleTickLeased(b *testing.B) {
	env, m := leasedEnv(b, filepath.Join(b.TempDir(), "npcd.db"), "bench")
	m.Start()
	defer m.Close(context.Background())
	benchIdle(b, env)
}

// BenchmarkCompact measures an admin compaction (Engine.Compact: plan,
// summary, commit) of one NPC after 30 more ticks, and reports as
// writer-µs/op how long it held the database's writer, which every other
// NPC's commit waits for meanwhile (the checkpoints' passes left out).
func BenchmarkCompact(b *testing.B) {
	env := newEnv(b)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		b.Fatal(err)
	}
	heldNow := func() time.Duration {
		w, ok := store.Writers(env.chars.DB())
		if !ok {
			b.Fatal("no write gate on the database")
		}
		return w.Held - w.CheckpointHeld
	}
	var held time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		askAndTick(b, env, "brom", fmt.Sprintf("%d.", i), 30)
		h0 := heldNow()
		b.StartTimer()
		rec, err := env.eng.Compact(ctx, "brom", "")
		if err != nil || rec == nil {
			b.Fatal(rec, err)
		}
		b.StopTimer()
		held += heldNow() - h0
		b.StartTimer()
	}
	b.ReportMetric(float64(held.Microseconds())/float64(b.N), "writer-µs/op")
}
