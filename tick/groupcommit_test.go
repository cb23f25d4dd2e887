package tick

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/llm"
)

// holdCommitter makes c busy, as if its writer were committing, until
// release is called, so that commits arriving meanwhile queue and are then
// committed together. waitQueued returns once n commits are queued.
func holdCommitter(t *testing.T, c *committer) (waitQueued func(n int), release func()) {
	t.Helper()
	// The writer of earlier commits (the test's setup) waits for more
	// once its queue is empty: it is stopped, and the committer left as
	// one that never started a writer.
	c.stop()
	c.mu.Lock()
	if c.writing || len(c.queue) > 0 {
		c.mu.Unlock()
		t.Fatal("the committer's writer ran on after stop")
	}
	c.stopped = false
	c.writing, c.busy = true, true // a group being committed: commits queue
	c.done = make(chan struct{})
	done := c.done
	c.mu.Unlock()
	waitQueued = func(n int) {
		for {
			c.mu.Lock()
			q := len(c.queue)
			c.mu.Unlock()
			if q >= n {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	var once sync.Once
	// The writer, started as a commit finding the committer idle would
	// start it, commits what queued meanwhile.
	release = func() {
		once.Do(func() {
			c.mu.Lock()
			c.busy = false
			c.mu.Unlock()
			go c.write(done)
		})
	}
	t.Cleanup(release)
	return waitQueued, release
}

func (c *committer) largestGroup() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.largest
}

// TestCommitterGivesEachMemberItsOwnOutcome queues commits behind a busy
// committer, so they share a group: one succeeds, one fails, one panics,
// one's caller gave up before the group began, one succeeds. The two good
// ones are committed together; each other one gets its own outcome and
// stores nothing.
func TestCommitterGivesEachMemberItsOwnOutcome(t *testing.T) {
	db := dbtest.SQLiteAt(t, filepath.Join(t.TempDir(), "gc.db"))
	if err := db.Exec("CREATE TABLE gc_rows (name TEXT NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	c := newCommitter(db, nil, nil)
	if !c.grouped {
		t.Fatal("commits on SQLite must be grouped")
	}
	waitQueued, release := holdCommitter(t, c)

	insert := func(name string) commitFunc {
		return func(ctx context.Context, tx *gorm.DB, _ *lateRows) error {
			return tx.WithContext(ctx).Exec("INSERT INTO gc_rows (name) VALUES (?)", name).Error
		}
	}
	boom := errors.New("boom")
	type outcome struct {
		err      error
		panicked any
	}
	names := []string{"good1", "fails", "panics", "cancelled", "good2"}
	outcomes := make([]outcome, len(names))
	cancelled, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, name := range names {
		fn := insert(name)
		ctx := context.Background()
		switch name {
		case "fails":
			fn = func(ctx context.Context, tx *gorm.DB, _ *lateRows) error {
				if err := insert(name)(ctx, tx, nil); err != nil {
					return err
				}
				return boom
			}
		case "panics":
			fn = func(ctx context.Context, tx *gorm.DB, _ *lateRows) error {
				if err := insert(name)(ctx, tx, nil); err != nil {
					return err
				}
				panic("commit bug")
			}
		case "cancelled":
			ctx = cancelled
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { outcomes[i].panicked = recover() }()
			outcomes[i].err = c.commit(ctx, fn)
		}()
		waitQueued(i + 1) // queued in this order
	}
	cancel()
	release()
	wg.Wait()

	var stored []string
	if err := db.Raw("SELECT name FROM gc_rows ORDER BY name").Scan(&stored).Error; err != nil {
		t.Fatal(err)
	}
	if strings.Join(stored, ",") != "good1,good2" {
		t.Errorf("stored %v, want only good1 and good2", stored)
	}
	for i, name := range names {
		o := outcomes[i]
		switch name {
		case "good1", "good2":
			if o.err != nil || o.panicked != nil {
				t.Errorf("%s: err %v, panic %v; want committed", name, o.err, o.panicked)
			}
		case "fails":
			if !errors.Is(o.err, boom) {
				t.Errorf("fails: err %v, want its own error", o.err)
			}
		case "panics":
			if o.panicked != "commit bug" {
				t.Errorf("panics: panic %v, err %v; want its panic raised in its own goroutine", o.panicked, o.err)
			}
		case "cancelled":
			if !errors.Is(o.err, context.Canceled) {
				t.Errorf("cancelled: err %v, want context.Canceled", o.err)
			}
		}
	}
	if got := c.largestGroup(); got != 2 {
		t.Errorf("largest committed group %d, want 2 (good1 and good2 together)", got)
	}
	// The committer is idle again: a lone commit goes through at once.
	if err := c.commit(context.Background(), insert("after")); err != nil {
		t.Fatal(err)
	}
}

// TestCommitterSurvivesAPanicOfItsOwn makes the committer's own code
// panic while it writes a group (its late writer), not a member's commit
// function: every member gets an error instead of waiting for ever, none of
// their rows is stored, and the committer goes on committing.
func TestCommitterSurvivesAPanicOfItsOwn(t *testing.T) {
	db := dbtest.SQLiteAt(t, filepath.Join(t.TempDir(), "gc.db"))
	if err := db.Exec("CREATE TABLE gc_rows (name TEXT NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	var armed sync.Mutex
	panics := true
	c := newCommitter(db, func(ctx context.Context, tx *gorm.DB, late *lateRows) error {
		armed.Lock()
		defer armed.Unlock()
		if panics {
			panic("late writer bug")
		}
		return nil
	}, nil)
	insert := func(name string) commitFunc {
		return func(ctx context.Context, tx *gorm.DB, late *lateRows) error {
			late.ticks = append(late.ticks, &character.TickRecord{}) // the late writer runs
			return tx.WithContext(ctx).Exec("INSERT INTO gc_rows (name) VALUES (?)", name).Error
		}
	}
	waitQueued, release := holdCommitter(t, c)
	const n = 3
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- c.commit(context.Background(), insert(fmt.Sprint("doomed", i))) }()
	}
	waitQueued(n)
	release()
	for range n {
		select {
		case err := <-errs:
			if err == nil || !strings.Contains(err.Error(), "late writer bug") {
				t.Errorf("err %v, want the committer's panic as an error", err)
			}
		case <-time.After(30 * time.Second): // a hang, not a timing
			t.Fatal("a member of the group that panicked was never answered")
		}
	}
	armed.Lock()
	panics = false
	armed.Unlock()
	if err := c.commit(context.Background(), insert("after")); err != nil {
		t.Fatalf("commit after the panic: %v", err)
	}
	var stored []string
	if err := db.Raw("SELECT name FROM gc_rows ORDER BY name").Scan(&stored).Error; err != nil {
		t.Fatal(err)
	}
	if strings.Join(stored, ",") != "after" {
		t.Errorf("stored %v, want only the commit after the panic", stored)
	}
}

// TestCommitterBoundsItsGroups queues more commits than a group holds:
// they are all committed, in groups of at most MaxCommitGroup.
func TestCommitterBoundsItsGroups(t *testing.T) {
	db := dbtest.SQLiteAt(t, filepath.Join(t.TempDir(), "gc.db"))
	if err := db.Exec("CREATE TABLE gc_rows (name TEXT NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	c := newCommitter(db, nil, nil)
	waitQueued, release := holdCommitter(t, c)
	const n = MaxCommitGroup + 10
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			errs <- c.commit(context.Background(), func(ctx context.Context, tx *gorm.DB, _ *lateRows) error {
				return tx.WithContext(ctx).Exec("INSERT INTO gc_rows (name) VALUES (?)", fmt.Sprint(i)).Error
			})
		}()
	}
	waitQueued(n)
	release()
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var count int64
	if err := db.Raw("SELECT COUNT(*) FROM gc_rows").Scan(&count).Error; err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Errorf("stored %d rows, want %d", count, n)
	}
	if got := c.largestGroup(); got != MaxCommitGroup {
		t.Errorf("largest group %d, want %d", got, MaxCommitGroup)
	}
}

// doomModel answers like the builtin model, but deletes the NPC named
// Doomed behind the engine's back while it thinks, so its tick's commit
// finds it gone.
type doomModel struct {
	llm.Chatter
	doom func()
}

func (d *doomModel) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if req.Task == llm.TaskTick && len(req.Messages) > 0 && strings.Contains(req.Messages[0].Content, "Doomed") {
		d.doom()
	}
	return d.Chatter.Chat(ctx, req)
}

// TestConcurrentTicksSurviveOneFailingCommit ticks many NPCs at once, their
// commits grouped, while one NPC is deleted mid-tick: that tick fails and
// stores nothing, every other commits its whole turn.
func TestConcurrentTicksSurviveOneFailingCommit(t *testing.T) {
	m := &doomModel{Chatter: llm.NewBuiltin()}
	env := openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), m)
	ctx := context.Background()
	const npcs, doomed = 8, "npc-3"
	m.doom = func() {
		if err := env.chars.Delete(ctx, doomed); err != nil {
			t.Errorf("delete %s: %v", doomed, err)
		}
	}
	ids := make([]string, npcs)
	for i := range ids {
		ids[i] = fmt.Sprintf("npc-%d", i)
		c := brom()
		c.ID, c.Model = ids[i], "remote-model"
		if ids[i] == doomed {
			c.Name = "Doomed"
		}
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, _, err := env.eng.PostEvents(ctx, ids[i], []EventInput{{ID: "e-" + ids[i], Kind: "say", Actor: "alice", Text: "Good morning, " + ids[i] + "!"}}); err != nil {
			t.Fatal(err)
		}
	}
	grouped := env.eng.commits.grouped
	release := func() {}
	if grouped {
		var waitQueued func(int)
		waitQueued, release = holdCommitter(t, env.eng.commits)
		go func() { waitQueued(npcs); release() }()
	}
	results := make([]*Result, npcs)
	errs := make([]error, npcs)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = env.eng.Tick(ctx, id)
		}()
	}
	wg.Wait()
	release()

	for i, id := range ids {
		if id == doomed {
			if !errors.Is(errs[i], character.ErrNotFound) {
				t.Errorf("%s: err %v, want ErrNotFound", id, errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("%s: %v", id, errs[i])
			continue
		}
		if results[i].Tick != 1 || results[i].Events != 1 || len(results[i].Actions) == 0 {
			t.Errorf("%s: result %+v, want tick 1 answering its event", id, results[i])
		}
		c, err := env.chars.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if c.State.Tick != 1 || c.State.LiveMessages == 0 {
			t.Errorf("%s: stored state %+v, want tick 1 with its turn", id, c.State)
		}
		if n, err := env.chars.PendingCount(ctx, id); err != nil || n != 0 {
			t.Errorf("%s: %d events pending (%v), want its event consumed", id, n, err)
		}
		if o, err := env.eng.Outcome(ctx, id, 1); err != nil || o.Tick != 1 {
			t.Errorf("%s: outcome %+v, %v; want tick 1 stored", id, o, err)
		}
	}
	// Nothing of the failed tick was stored.
	db := env.eng.deps.DB
	for _, table := range []string{"messages", "events", "tick_records", "tick_outcomes", "profiles", "entries"} {
		var n int64
		if err := db.Table(table).Where("character_id = ?", doomed).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows of %s for the deleted NPC, want none", n, table)
		}
	}
	if grouped {
		if got := env.eng.commits.largestGroup(); got != npcs-1 {
			t.Errorf("largest committed group %d, want the %d surviving ticks together", got, npcs-1)
		}
	}
}

// TestGroupedCommitsConsumeEventsExactlyOnce posts events to many NPCs
// while they tick concurrently: every event is answered by exactly one
// turn, none is lost, none is answered twice.
func TestGroupedCommitsConsumeEventsExactlyOnce(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	const npcs, events = 6, 12
	ids := make([]string, npcs)
	for i := range ids {
		ids[i] = fmt.Sprintf("npc-%d", i)
		c := brom()
		c.ID = ids[i]
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	posted := make(chan struct{})
	var postWG sync.WaitGroup
	for _, id := range ids {
		postWG.Add(1)
		go func() {
			defer postWG.Done()
			for k := 0; k < events; k++ {
				ev := EventInput{ID: fmt.Sprintf("%s-e%d", id, k), Kind: "say", Actor: "alice", Text: fmt.Sprintf("Message %d for %s.", k, id)}
				if _, _, err := env.eng.PostEvents(ctx, id, []EventInput{ev}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		// Two tickers per NPC: their ticks of one NPC never overlap, and
		// those of different NPCs commit together.
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done := false; ; {
					if _, err := env.eng.Tick(ctx, id); err != nil {
						t.Error(err)
						return
					}
					if done {
						return
					}
					select {
					case <-posted:
						done = true // one more tick takes what is left
					default:
					}
				}
			}()
		}
	}
	postWG.Wait()
	close(posted)
	wg.Wait()
	// What the last ticks left (a turn takes what fits) is taken now.
	for _, id := range ids {
		for {
			res, err := env.eng.Tick(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if res.Idle {
				break
			}
		}
	}

	for _, id := range ids {
		msgs, err := env.chars.History(ctx, id, character.HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, m := range msgs {
			for _, ref := range m.EventRefs.V {
				seen[ref]++
			}
		}
		for k := 0; k < events; k++ {
			ref := fmt.Sprintf("%s-e%d", id, k)
			if seen[ref] != 1 {
				t.Errorf("%s: event %s answered %d times, want once", id, ref, seen[ref])
			}
		}
		if len(seen) != events {
			t.Errorf("%s: %d events answered, want %d", id, len(seen), events)
		}
		if n, err := env.chars.PendingCount(ctx, id); err != nil || n != 0 {
			t.Errorf("%s: %d events pending (%v)", id, n, err)
		}
	}
}

// Event posts commit through the committer too, grouped with whatever
// else is queued: posts for many NPCs queued together commit in one
// transaction, and one that is refused (its NPC deleted meanwhile) gets
// its own error while the others' events are stored, once each.
func TestEventPostsCommitInGroups(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	const npcs, doomed = 6, "npc-2"
	ids := make([]string, npcs)
	for i := range ids {
		ids[i] = fmt.Sprintf("npc-%d", i)
		c := brom()
		c.ID = ids[i]
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	c := env.eng.commits
	release := func() {}
	if c.grouped {
		_, release = holdCommitter(t, c)
	} else if err := env.chars.Delete(ctx, doomed); err != nil {
		t.Fatal(err) // PostgreSQL: each post commits alone
	}
	errs := make([]error, npcs)
	accepted := make([]int, npcs)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			accepted[i], _, errs[i] = env.eng.PostEvents(ctx, id, []EventInput{{ID: "e-" + id, Kind: "say", Actor: "alice", Text: "Hello, " + id}})
		}()
	}
	if c.grouped {
		// Every post waits in the committer's queue (this waits, it
		// times nothing).
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			c.mu.Lock()
			q := len(c.queue)
			c.mu.Unlock()
			if q == npcs {
				break
			}
			if time.Now().After(deadline) {
				release()
				wg.Wait()
				t.Fatalf("%d event posts queued at the committer, want %d", q, npcs)
			}
		}
		if err := env.chars.Delete(ctx, doomed); err != nil {
			t.Fatal(err)
		}
		release()
	}
	wg.Wait()
	for i, id := range ids {
		if id == doomed {
			if !errors.Is(errs[i], character.ErrNotFound) {
				t.Errorf("%s: %v, want ErrNotFound", id, errs[i])
			}
			continue
		}
		if errs[i] != nil || accepted[i] != 1 {
			t.Errorf("%s: accepted %d, %v; want the event", id, accepted[i], errs[i])
		}
		if n, err := env.chars.PendingCount(ctx, id); err != nil || n != 1 {
			t.Errorf("%s: %d events pending (%v), want 1", id, n, err)
		}
	}
	if got := c.largestGroup(); c.grouped && got != npcs-1 {
		t.Errorf("largest committed group %d, want the %d posts that stand together", got, npcs-1)
	}
}

// A commit that comes while the writer waits for one, its queue empty, is
// committed by that writer, not by one started anew; stop ends the writer,
// and a commit after it is still committed, by a writer that ends with its
// queue. Engine.Close stops its committer's writer.
func TestCommitterWriterWaitsForTheNextCommit(t *testing.T) {
	db := dbtest.SQLiteAt(t, filepath.Join(t.TempDir(), "gc.db"))
	if err := db.Exec("CREATE TABLE gc_rows (name TEXT NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	c := newCommitter(db, nil, nil)
	insert := func(name string) {
		t.Helper()
		err := c.commit(context.Background(), func(ctx context.Context, tx *gorm.DB, _ *lateRows) error {
			return tx.WithContext(ctx).Exec("INSERT INTO gc_rows (name) VALUES (?)", name).Error
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	state := func() (writing bool, starts int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writing, c.starts
	}
	insert("a")
	time.Sleep(writerLinger / 20) // the writer has found its queue empty
	begun := time.Now()
	insert("b")
	// The commit wakes the waiting writer: it does not wait out its linger.
	if d := time.Since(begun); d >= writerLinger/2 {
		t.Errorf("the second commit took %v: the waiting writer was not woken", d)
	}
	if writing, starts := state(); !writing || starts != 1 {
		t.Errorf("after two commits %v apart: writing %v, %d writers started; want one writer, still waiting", writerLinger/20, writing, starts)
	}
	begun = time.Now()
	c.stop()
	if writing, _ := state(); writing {
		t.Error("the writer runs on after stop")
	}
	// stop wakes the waiting writer: it does not wait out writerLinger.
	if d := time.Since(begun); d >= writerLinger {
		t.Errorf("stop returned after %v: the writer was not woken", d)
	}
	insert("c")
	c.stop()
	if writing, starts := state(); writing || starts != 2 {
		t.Errorf("a commit after stop: writing %v, %d writers started; want a second writer, ended", writing, starts)
	}
	var n int64
	if err := db.Raw("SELECT COUNT(*) FROM gc_rows").Scan(&n).Error; err != nil || n != 3 {
		t.Fatalf("%d rows (%v), want 3", n, err)
	}

	env := newEnv(t)
	if _, err := env.eng.PutNPC(context.Background(), brom()); err != nil {
		t.Fatal(err)
	}
	env.eng.commits.alone = nil // every commit to the writer
	tickOnce(t, env, "Good morning.")
	if err := env.eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	env.eng.commits.mu.Lock()
	writing, starts := env.eng.commits.writing, env.eng.commits.starts
	env.eng.commits.mu.Unlock()
	switch {
	case !env.eng.commits.grouped: // PostgreSQL: each commit in its caller
		if starts != 0 {
			t.Errorf("%d writers started on a database whose commits are not grouped", starts)
		}
	case starts == 0 || writing:
		t.Errorf("after Close: %d writers started, writing %v; want the writer that committed the tick ended", starts, writing)
	}
}

// A commit that nothing in flight could join is made in its caller's
// goroutine, with no writer started; a commit that comes meanwhile queues
// and is made by the writer as soon as the first is done; when others
// are in flight (alone false) commits go to the writer.
func TestCommitterCommitsAloneInItsCaller(t *testing.T) {
	db := dbtest.SQLiteAt(t, filepath.Join(t.TempDir(), "gc.db"))
	if err := db.Exec("CREATE TABLE gc_rows (name TEXT NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	var alone atomic.Bool
	alone.Store(true)
	c := newCommitter(db, nil, alone.Load)
	defer c.stop()
	// insert commits a row; inWriter tells whether the writer made it.
	insert := func(name string, hold <-chan struct{}) (inWriter bool, err error) {
		err = c.commit(context.Background(), func(ctx context.Context, tx *gorm.DB, _ *lateRows) error {
			inWriter = strings.Contains(string(debug.Stack()), ".(*committer).write(")
			if hold != nil {
				<-hold
			}
			return tx.WithContext(ctx).Exec("INSERT INTO gc_rows (name) VALUES (?)", name).Error
		})
		return inWriter, err
	}
	state := func() (busy bool, queued, starts int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.busy, len(c.queue), c.starts
	}
	if inWriter, err := insert("a", nil); err != nil || inWriter {
		t.Fatalf("a commit alone: err %v, made by the writer %v; want it made by its caller", err, inWriter)
	}
	if _, _, starts := state(); starts != 0 {
		t.Errorf("%d writers started for a commit alone", starts)
	}

	hold := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := insert("b", hold)
		first <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for busy, _, _ := state(); !busy; busy, _, _ = state() {
		if time.Now().After(deadline) {
			t.Fatal("the first commit never began")
		}
		time.Sleep(time.Millisecond)
	}
	type outcome struct {
		inWriter bool
		err      error
	}
	second := make(chan outcome, 1)
	go func() {
		inWriter, err := insert("c", nil)
		second <- outcome{inWriter, err}
	}()
	for _, queued, _ := state(); queued == 0; _, queued, _ = state() {
		if time.Now().After(deadline) {
			t.Fatal("a commit that came while another was made by its caller did not queue")
		}
		time.Sleep(time.Millisecond)
	}
	begun := time.Now()
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	o := <-second
	if o.err != nil || !o.inWriter {
		t.Errorf("a commit queued behind one made by its caller: err %v, made by the writer %v; want the writer's", o.err, o.inWriter)
	}
	// The first commit kicks the writer once done: the second does not
	// wait out the writer's linger.
	if d := time.Since(begun); d >= writerLinger/2 {
		t.Errorf("the queued commit took %v after the first was done: the writer was not woken", d)
	}

	alone.Store(false)
	if inWriter, err := insert("d", nil); err != nil || !inWriter {
		t.Errorf("a commit with others in flight: err %v, made by the writer %v; want the writer's", err, inWriter)
	}
	var n int64
	if err := db.Raw("SELECT COUNT(*) FROM gc_rows").Scan(&n).Error; err != nil || n != 4 {
		t.Fatalf("%d rows (%v), want 4", n, err)
	}
}

// The engine commits in a tick's own goroutine only when nothing else that
// commits is in flight: a tick alone may, two ticks at once may not.
func TestEngineCommitsAloneOnlyWithNothingElseInFlight(t *testing.T) {
	m := &doomModel{Chatter: llm.NewBuiltin()}
	env := openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), m)
	ctx := context.Background()
	for _, id := range []string{"npc-a", "npc-b"} {
		c := brom()
		c.ID, c.Name, c.Model = id, "Doomed "+id, "remote-model"
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	post := func(id, text string) {
		t.Helper()
		if _, _, err := env.eng.PostEvents(ctx, id, []EventInput{{Kind: "say", Actor: "alice", Text: text}}); err != nil {
			t.Fatal(err)
		}
	}
	// While the model thinks, each tick waits until all of the phase's
	// ticks are thinking, reads whether a commit would be alone, and goes
	// on only once all of them have read it: every read is made with all
	// of the phase's ticks in flight.
	var (
		mu       sync.Mutex
		seen     []bool
		arrived  = make(chan struct{}, 2)
		read     = make(chan struct{}, 2)
		all, out chan struct{}
	)
	m.doom = func() {
		mu.Lock()
		a, o := all, out
		mu.Unlock()
		arrived <- struct{}{}
		<-a
		mu.Lock()
		seen = append(seen, env.eng.commits.alone())
		mu.Unlock()
		read <- struct{}{}
		<-o
	}
	phase := func(ids ...string) []bool {
		t.Helper()
		mu.Lock()
		all, out, seen = make(chan struct{}), make(chan struct{}), nil
		a, o := all, out
		mu.Unlock()
		errs := make(chan error, len(ids))
		for _, id := range ids {
			post(id, "Good morning, "+id+".")
			go func() {
				_, err := env.eng.Tick(ctx, id)
				errs <- err
			}()
		}
		for range ids {
			<-arrived
		}
		close(a)
		for range ids {
			<-read
		}
		close(o)
		for range ids {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	if got := phase("npc-a"); len(got) != 1 || !got[0] {
		t.Errorf("a tick alone: a commit alone %v, want [true]", got)
	}
	if got := phase("npc-a", "npc-b"); len(got) != 2 || got[0] || got[1] {
		t.Errorf("two ticks at once: a commit alone %v, want [false false]", got)
	}
}
