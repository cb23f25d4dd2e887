package tick

import (
	"context"
	"fmt"
	"runtime/pprof"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

// MaxCommitGroup bounds how many ticks' commits share one transaction.
const MaxCommitGroup = 64

// commitFunc writes one tick's turn inside tx, leaving to late the rows
// that are written at the end of the transaction. It may run more than
// once (its group rolled back for another member's failure, or PostgreSQL
// aborting a deadlock victim): every run starts from what the tick holds in
// memory and sets again whatever it leaves for the caller.
type commitFunc func(ctx context.Context, tx *gorm.DB, late *lateRows) error

// lateRows are the writes the members of a commit group leave to the end
// of its transaction, where one statement makes each kind for all of them
// (character.Store.ConsumeAll, AddTicks, AddOutcomes) instead of one per
// member: the group holds SQLite's only writer while its statements run,
// and what a statement costs beside its rows is paid by every tick queued
// behind it. The outcomes are the transaction's last writes, as AddOutcome
// requires.
type lateRows struct {
	consumed []character.Consumption
	ticks    []*character.TickRecord
	outcomes []*character.TickOutcome
}

// lateFunc writes the rows late holds inside tx (nil for a committer
// whose members leave none).
type lateFunc func(ctx context.Context, tx *gorm.DB, late *lateRows) error

// committer commits the turns of concurrently ticking NPCs, and the events
// posted meanwhile, together. SQLite has one writer at a time, and a
// transaction's fixed cost (taking the write lock, writing and syncing the
// log) dwarfs a turn's few rows: ticks that would queue on the lock one by
// one instead queue here, and one goroutine, the writer, commits the whole
// queue, up to MaxCommitGroup, in one transaction, then the commits queued
// meanwhile in the next, until the queue is empty. A commit that finds the
// committer idle starts the writer and is committed at once, alone:
// nothing ever waits for company.
//
// A commit that nothing in flight could join (the engine's ticks and
// posts: newCommitter's alone) is made in its caller's goroutine instead,
// alone, as the writer would have made it, without the two handoffs to
// the writer and back, each waking a thread (500 ticks a second offered,
// 1,000 NPCs on 2 cores: a p95 of 2.9 ms instead of 3.4 and a p99 of 6.3
// instead of 7.0, medians of 8 runs of each). Under load there is always
// another tick in flight, and every commit goes to the writer.
//
// Once the queue is empty the writer waits for the next commit, up to
// writerLinger, before it ends: a writer started again for every commit
// of a quiet world grew its new stack at every transaction, to the depth
// SQLite's statements need (500 ticks a second offered, 1,000 NPCs: about
// a fifth of the committer's CPU). Engine.Close ends it.
//
// The writer, not the ticks in turn, runs the groups one after the other:
// a tick that led a group and handed the lead to the next in line went on
// with its own work, and the database was not written again until the
// next leader got a core (1,000 NPCs, 6 ticks at once on 2 cores: the
// database's writer was held 79-81% of the time with leaders, 88-90%
// with the writer, at 2-5% more ticks a second).
//
// Every member of a group learns its own outcome, and only once the
// transaction holding its writes has committed. A member whose writes fail
// rolls the group back; it gets its error and the others run again without
// it, so one tick's failure never fails or loses another's. A member whose
// context ended before its group began is not written.
//
// On PostgreSQL, where writers do not exclude one another, each commit runs
// in its own transaction, in the caller's goroutine (retried when
// PostgreSQL aborts it as a deadlock victim): one transaction holding many
// NPCs' rows would only lengthen the waits of whatever touches them.
type committer struct {
	db      *gorm.DB
	grouped bool // SQLite: commits are grouped
	late    lateFunc
	alone   func() bool // see newCommitter; nil: every commit goes to the writer

	mu    sync.Mutex
	queue []*commitJob
	// writing is set while the writer runs (write); the queue is empty
	// when it is not. kick wakes a writer waiting for commits; stopped,
	// set by stop, ends it once the queue is empty, and done is closed
	// when it has ended (nil while no writer was started since).
	writing bool
	busy    bool // a group is being committed, by the writer or by its caller
	kick    chan struct{}
	stopped bool
	done    chan struct{}
	// largest is the most commits one transaction held, starts the
	// writers started (tests read them to see that commits were grouped,
	// and that a writer waits for the next commit).
	largest, starts int
}

type commitJob struct {
	ctx  context.Context
	fn   commitFunc
	wake chan struct{} // signalled once, when answered
	done bool          // answered (err holds the outcome)
	err  error
}

// newCommitter returns a committer of db's writes. alone, when set,
// reports that no other commit can come while a commit is made (nothing
// else in flight that commits): such a commit is made in its caller's
// goroutine.
func newCommitter(db *gorm.DB, late lateFunc, alone func() bool) *committer {
	return &committer{db: db, grouped: store.IsSQLite(db), late: late, alone: alone, kick: make(chan struct{}, 1)}
}

// writerLinger is how long the writer waits for another commit once its
// queue is empty before it ends.
const writerLinger = time.Second

// wake makes a writer waiting for commits look at its queue again. A kick
// already waiting does the same: a writer never misses one.
func (c *committer) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// stop ends the writer once its queue is empty and waits for it to end.
// Commits queued after it still run, by a writer started for them that
// ends as soon as its queue is empty.
func (c *committer) stop() {
	c.mu.Lock()
	c.stopped = true
	done := c.done
	c.mu.Unlock()
	c.wake()
	if done != nil {
		<-done
	}
}

// commit runs fn in a transaction, with the commits of other ticks queued
// meanwhile, and returns fn's error or the transaction's once it is over.
// A panic in fn is raised again here, in the caller's goroutine.
func (c *committer) commit(ctx context.Context, fn commitFunc) error {
	if !c.grouped {
		return store.Transaction(ctx, c.db, func(tx *gorm.DB) error {
			var late lateRows
			if err := fn(ctx, tx, &late); err != nil {
				return err
			}
			return c.writeLate(ctx, tx, &late)
		})
	}
	j := &commitJob{ctx: ctx, fn: fn, wake: make(chan struct{}, 1)}
	c.mu.Lock()
	if !c.busy && len(c.queue) == 0 && c.alone != nil && c.alone() {
		// No one could join its group: committed here, in the caller's
		// goroutine, without waking the writer and being woken by it.
		// A commit arriving meanwhile queues and starts the writer, which
		// waits while this one runs and is kicked once it is done.
		c.busy = true
		c.mu.Unlock()
		c.runSafely([]*commitJob{j})
		c.mu.Lock()
		c.busy = false
		queued := len(c.queue) > 0
		c.mu.Unlock()
		if queued {
			c.wake()
		}
	} else {
		c.queue = append(c.queue, j)
		c.startWriter()
		c.mu.Unlock()
		c.wake()
	}
	<-j.wake
	return j.result()
}

// startWriter starts the writer unless it runs. The caller holds c.mu.
func (c *committer) startWriter() {
	if !c.writing {
		c.writing = true
		c.starts++
		c.done = make(chan struct{})
		go c.write(c.done)
	}
}

// write commits the queue, a group at a time, until it has stayed empty
// for writerLinger or the committer is stopped, then closes done. Each
// group's statements carry the profiler labels of its first member.
func (c *committer) write(done chan struct{}) {
	defer close(done)
	idle := time.NewTimer(writerLinger)
	defer idle.Stop()
	waited := false // the queue stayed empty for writerLinger
	for {
		c.mu.Lock()
		n := min(len(c.queue), MaxCommitGroup)
		if n == 0 && (waited || c.stopped) {
			c.writing = false
			c.mu.Unlock()
			return
		}
		if n == 0 || c.busy {
			c.mu.Unlock()
			idle.Reset(writerLinger)
			select {
			case <-c.kick:
			case <-idle.C:
				waited = n == 0
			}
			continue
		}
		waited = false
		c.busy = true
		group := make([]*commitJob, n)
		copy(group, c.queue)
		c.queue = append(c.queue[:0], c.queue[n:]...)
		c.mu.Unlock()
		pprof.SetGoroutineLabels(group[0].ctx)
		c.runSafely(group)
		c.mu.Lock()
		c.busy = false
		c.mu.Unlock()
	}
}

// runSafely runs group, answering with an error the members a panic out
// of the committer's own code left unanswered (their commit functions'
// panics are theirs, see call): the writer goes on with the next group.
func (c *committer) runSafely(group []*commitJob) {
	defer func() {
		if v := recover(); v != nil {
			for _, j := range group {
				if !j.done {
					answer(j, fmt.Errorf("commit: %v", v))
				}
			}
		}
	}()
	c.run(group)
}

// result is the job's outcome; a panic of its commit function is raised
// again.
func (j *commitJob) result() error {
	if p, ok := j.err.(*commitPanic); ok {
		panic(p.v)
	}
	return j.err
}

// commitPanic carries a panic of a member's commit function to its own
// goroutine.
type commitPanic struct{ v any }

func (p *commitPanic) Error() string { return fmt.Sprintf("panic in commit: %v", p.v) }

func answer(j *commitJob, err error) {
	j.err, j.done = err, true
	j.wake <- struct{}{}
}

// run commits group, answering every member.
func (c *committer) run(group []*commitJob) {
	live := make([]*commitJob, 0, len(group))
	for _, j := range group {
		if err := j.ctx.Err(); err != nil {
			answer(j, err)
			continue
		}
		live = append(live, j)
	}
	// Members whose writes failed after others' in the same transaction
	// are tried again alone, so the error each gets is its own.
	var alone []*commitJob
	for len(live) > 0 {
		bad, err := c.tx(live)
		switch {
		case err == nil:
			c.committed(len(live))
			for _, j := range live {
				answer(j, nil)
			}
			live = nil
		case bad == 0:
			answer(live[0], err)
			live = live[1:]
		case bad > 0:
			// Its writes failed: the others go on without it.
			alone = append(alone, live[bad])
			live = append(live[:bad], live[bad+1:]...)
		default:
			// The transaction itself failed (begin or commit): each
			// member is tried alone, so none pays for another.
			alone = append(alone, live...)
			live = nil
		}
	}
	for _, j := range alone {
		_, err := c.tx([]*commitJob{j})
		if err == nil {
			c.committed(1)
		}
		answer(j, err)
	}
}

// committed records a transaction that committed n members.
func (c *committer) committed(n int) {
	c.mu.Lock()
	c.largest = max(c.largest, n)
	c.mu.Unlock()
}

// tx runs jobs' commit functions in one transaction. When one fails it
// returns its index and error (the transaction rolled back); a failure of
// the transaction itself has index -1.
func (c *committer) tx(jobs []*commitJob) (bad int, err error) {
	bad = -1
	err = store.RunTransaction(context.Background(), c.db, func(tx *gorm.DB) error {
		var late lateRows
		for i, j := range jobs {
			// The member's context ends its wait, not its statements: an
			// interrupted statement would roll back the whole group.
			if err := call(j.fn, context.WithoutCancel(j.ctx), tx, &late); err != nil {
				bad = i
				return err
			}
		}
		// Whose rows failed is not known here: the group fails as a
		// whole, and each member is tried alone (run).
		return c.writeLate(context.Background(), tx, &late)
	})
	return bad, err
}

// writeLate writes the rows the members left in late, if any.
func (c *committer) writeLate(ctx context.Context, tx *gorm.DB, late *lateRows) error {
	if len(late.consumed) == 0 && len(late.ticks) == 0 && len(late.outcomes) == 0 {
		return nil
	}
	if c.late == nil {
		return fmt.Errorf("commit: %d consumptions, %d tick records and %d outcomes left with no writer", len(late.consumed), len(late.ticks), len(late.outcomes))
	}
	return c.late(ctx, tx, late)
}

// call runs fn, turning a panic into a *commitPanic.
func call(fn commitFunc, ctx context.Context, tx *gorm.DB, late *lateRows) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &commitPanic{v: v}
		}
	}()
	return fn(ctx, tx, late)
}
