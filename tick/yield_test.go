package tick

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// yieldWatcher answers like the builtin model and records, at each turn's
// first call, how many times the ticks had yielded by then.
type yieldWatcher struct {
	llm.Chatter
	yields *atomic.Int32
	seen   []int32
}

func (m *yieldWatcher) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if req.Task == llm.TaskTick {
		m.seen = append(m.seen, m.yields.Load())
	}
	return m.Chatter.Chat(ctx, req)
}

// A tick that goes on gives up its core once on SQLite, after its glance
// and before its model is asked, so that a writer its reads woke runs
// first; an idle tick does not, nor does any tick on PostgreSQL, whose
// writer is not in the process.
func TestBusyTickYieldsToTheWriterAfterItsGlance(t *testing.T) {
	var yields atomic.Int32
	m := &yieldWatcher{Chatter: llm.NewBuiltin(), yields: &yields}
	env := openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), m)
	env.eng.yield = func() { yields.Add(1) }
	per := int32(0)
	if store.IsSQLite(env.eng.deps.DB) {
		per = 1
	}
	ctx := context.Background()
	c := brom()
	c.Model = "remote-model" // asks m
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	for i := int32(1); i <= 3; i++ {
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: "Good morning, Brom."}}); err != nil {
			t.Fatal(err)
		}
		res, err := env.eng.Tick(ctx, "brom")
		if err != nil || res.Idle {
			t.Fatalf("tick %d: %v, %v", i, res, err)
		}
		if got := yields.Load(); got != i*per {
			t.Fatalf("after %d busy ticks the ticks yielded %d times, want %d", i, got, i*per)
		}
		if n := len(m.seen); n == 0 || m.seen[n-1] != i*per {
			t.Fatalf("tick %d asked its model after %v yields, want %d (yield after the glance, before the model)", i, m.seen, i*per)
		}
		res, err = env.eng.Tick(ctx, "brom")
		if err != nil || !res.Idle {
			t.Fatalf("tick with nothing pending: %v, %v, want idle", res, err)
		}
		if got := yields.Load(); got != i*per {
			t.Fatalf("an idle tick yielded: %d yields after %d busy ticks", got, i)
		}
	}
}
