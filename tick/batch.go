package tick

import (
	"context"
	"sync"

	"github.com/npcd/npcd/character"
)

// PendingNPCs lists the NPCs with pending events or posted tool results,
// of one scope when scope is not empty, ordered by id.
func (e *Engine) PendingNPCs(ctx context.Context, scope string) ([]string, error) {
	return e.deps.Characters.PendingIn(ctx, character.PendingQuery{Scope: scope})
}

// TickEach ticks ids in parallel (at most MaxBatchWorkers at once), keys
// mapping NPC ids to the idempotency key of their tick, and calls done for
// each NPC as soon as its tick ends, one call at a time, in the order they
// finish. It returns once every tick has ended and done has returned.
func (e *Engine) TickEach(ctx context.Context, ids []string, keys map[string]string, done func(i int, r *Result, err error)) {
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(MaxBatchWorkers, len(ids)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				r, err := e.TickWithKey(ctx, ids[i], keys[ids[i]])
				mu.Lock()
				done(i, r, err)
				mu.Unlock()
			}
		}()
	}
	for i := range ids {
		work <- i
	}
	close(work)
	wg.Wait()
}
