package tick

import (
	"context"
	"fmt"

	"github.com/npcd/npcd/internal/keylock"
	"github.com/npcd/npcd/sleep"
)

// NewLocks returns per-NPC locks held in memory: ticks of one NPC never
// overlap, different NPCs run in parallel. The engine takes them as
// Deps.Locks and a sleep.Runner shares them, so a sleep's plan and commit
// never interleave with a tick. A waiter that gives up gets an error
// matching ErrBusy.
func NewLocks() sleep.Locker { return npcLocks{keylock.New()} }

type npcLocks struct{ m *keylock.Map }

func (l npcLocks) Lock(ctx context.Context, id string) (func(), error) {
	unlock, err := l.m.Lock(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%w: waiting for npc %q: %v", ErrBusy, id, err)
	}
	return unlock, nil
}
