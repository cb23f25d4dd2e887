package tick

import (
	"context"

	"github.com/npcd/npcd/sleep"
)

// Sleep runs one sleep of NPC id through Deps.Sleeper (a sleep.Runner:
// consolidation, then compaction past the sleep threshold, the story told
// in package sleep). It is refused once the engine is closing, and Close
// waits for it.
func (e *Engine) Sleep(ctx context.Context, id string) (*sleep.Report, error) {
	if err := e.begin(); err != nil {
		return nil, err
	}
	defer e.inflight.Done()
	return e.deps.Sleeper.Sleep(ctx, id)
}
