package tick

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/testdb"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/tools"
)

// autoEnv is an engine on a fake clock whose auto-ticks report on a
// channel.
type autoEnv struct {
	chars *character.Store
	eng   *Engine
	clock *clockwork.FakeClock
	ticks chan *Result
}

func newAutoEnv(t *testing.T, path string) *autoEnv {
	t.Helper()
	return newAutoEnvWith(t, path, nil)
}

func newAutoEnvWith(t *testing.T, path string, remote llm.Chatter) *autoEnv {
	t.Helper()
	db := testdb.OpenAt(t, path)
	chars := character.NewStore(db)
	jour := journal.NewStore(db)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC))
	eng, err := New(Deps{DB: db, Characters: chars, Journal: jour, Internals: tools.NewInternals(jour, chars), Retriever: jour,
		Builtin: llm.NewBuiltin(), Owners: []Owner{jour}, Clock: clock, Remote: remote}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	a := &autoEnv{chars: chars, eng: eng, clock: clock, ticks: make(chan *Result, 16)}
	eng.auto.hook = func(id string, r *Result, err error) {
		if err != nil {
			t.Errorf("auto-tick of %s: %v", id, err)
		}
		a.ticks <- r
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	return a
}

func (a *autoEnv) put(t *testing.T, debounce, maxWait int) {
	t.Helper()
	c := brom()
	c.AutoTick = character.AutoTickSettings{Enabled: true, DebounceMS: debounce, MaxWaitMS: maxWait}
	if _, err := a.eng.PutNPC(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// say posts one event and waits until its timer is armed.
func (a *autoEnv) say(t *testing.T, text string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := a.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "Alice", Text: text}}); err != nil {
		t.Fatal(err)
	}
	if err := a.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

// advance moves the fake clock and reports whether an auto-tick ran.
func (a *autoEnv) advance(t *testing.T, d time.Duration) *Result {
	t.Helper()
	a.clock.Advance(d)
	select {
	case r := <-a.ticks:
		return r
	default:
	}
	return nil
}

// wait returns the next auto-tick's result.
func (a *autoEnv) wait(t *testing.T) *Result {
	t.Helper()
	select {
	case r := <-a.ticks:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no auto-tick")
		return nil
	}
}

func (a *autoEnv) records(t *testing.T) int {
	t.Helper()
	rs, err := a.chars.Ticks(context.Background(), "brom", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

// Events arriving within the debounce of each other are answered by one
// tick, once the NPC has been quiet for the debounce.
func TestAutoTickDebounceCoalesces(t *testing.T) {
	a := newAutoEnv(t, filepath.Join(t.TempDir(), "npcd.db"))
	a.put(t, 50, 500)
	a.say(t, "Hello smith.")
	for _, text := range []string{"I need a blade.", "A long one."} {
		if r := a.advance(t, 30*time.Millisecond); r != nil {
			t.Fatalf("ticked %+v within the debounce", r)
		}
		a.say(t, text)
	}
	if r := a.advance(t, 49*time.Millisecond); r != nil || a.records(t) != 0 {
		t.Fatalf("ticked before the NPC was quiet for the debounce: %+v", r)
	}
	a.clock.Advance(time.Millisecond)
	r := a.wait(t)
	if r.Idle || r.Events != 3 || len(r.Actions) == 0 {
		t.Fatalf("auto-tick = %+v, want one tick answering the 3 events", r)
	}
	if n := a.records(t); n != 1 {
		t.Errorf("tick records = %d, want 1", n)
	}
	// Its actions are in the feed.
	feed, err := a.eng.Actions(context.Background(), FeedQuery{})
	if err != nil || len(feed.Ticks) != 1 || len(feed.Ticks[0].Actions) == 0 {
		t.Errorf("feed = %+v, %v; want the auto-tick's actions", feed, err)
	}
}

// Under a steady stream of events the tick comes max_wait after the first.
func TestAutoTickMaxWaitBoundsTheWait(t *testing.T) {
	a := newAutoEnv(t, filepath.Join(t.TempDir(), "npcd.db"))
	a.put(t, 50, 100)
	a.say(t, "One.")
	for i, text := range []string{"Two.", "Three.", "Four."} {
		if r := a.advance(t, 30*time.Millisecond); r != nil {
			t.Fatalf("ticked %+v after %d ms", r, 30*(i+1))
		}
		a.say(t, text)
	}
	// 90 ms since the first event, 0 since the last: due at 100 ms.
	if r := a.advance(t, 9*time.Millisecond); r != nil {
		t.Fatalf("ticked %+v before max_wait", r)
	}
	a.clock.Advance(time.Millisecond)
	if r := a.wait(t); r.Idle || r.Events != 4 {
		t.Fatalf("auto-tick = %+v, want the 4 events answered at max_wait", r)
	}
}

// A manual tick between the event and the auto-tick answers it; the
// auto-tick then finds nothing and writes nothing.
func TestAutoTickAfterManualTickIsIdle(t *testing.T) {
	a := newAutoEnv(t, filepath.Join(t.TempDir(), "npcd.db"))
	a.put(t, 50, 500)
	a.say(t, "Hello smith.")
	if r, err := a.eng.Tick(context.Background(), "brom"); err != nil || r.Idle {
		t.Fatalf("manual tick = %+v, %v", r, err)
	}
	a.clock.Advance(50 * time.Millisecond)
	if r := a.wait(t); !r.Idle {
		t.Fatalf("auto-tick after a manual one = %+v, want idle", r)
	}
	if n := a.records(t); n != 1 {
		t.Errorf("tick records = %d, want the manual tick's only", n)
	}
}

// NPCs without auto-tick are not ticked; input pending at a restart is
// ticked after ResumeAutoTicks.
func TestAutoTickResumesAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "npcd.db")
	a := newAutoEnv(t, path)
	a.put(t, 50, 500)
	mira := &character.Character{ID: "mira", Name: "Mira", Persona: "You are Mira, a baker."}
	if _, err := a.eng.PutNPC(context.Background(), mira); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.eng.PostEvents(context.Background(), "mira", []EventInput{{Kind: "say", Actor: "Alice", Text: "Bread?"}}); err != nil {
		t.Fatal(err)
	}
	a.say(t, "Hello smith.")
	// The daemon stops before the debounce is over.
	if err := a.eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.clock.Advance(time.Second)
	if n := a.records(t); n != 0 {
		t.Fatalf("tick records after close = %d, want 0", n)
	}
	b := newAutoEnv(t, path)
	if n, err := b.eng.ResumeAutoTicks(context.Background()); err != nil || n != 1 {
		t.Fatalf("ResumeAutoTicks = %d, %v; want brom only", n, err)
	}
	if err := b.clock.BlockUntilContext(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(50 * time.Millisecond)
	if r := b.wait(t); r.Idle || r.NPC != "brom" || r.Events != 1 {
		t.Fatalf("resumed auto-tick = %+v, want brom's event answered", r)
	}
	if n, err := b.chars.PendingCount(context.Background(), "mira"); err != nil || n != 1 {
		t.Errorf("mira (no auto-tick) pending = %d, %v; want her event left for the game", n, err)
	}
}

// heldModel answers as the builtin model once released.
type heldModel struct {
	entered chan struct{}
	release chan struct{}
}

func (h *heldModel) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	h.entered <- struct{}{}
	<-h.release
	return llm.NewBuiltin().Chat(ctx, req)
}

// Close waits for a running auto-tick, which commits.
func TestCloseWaitsForAutoTick(t *testing.T) {
	model := &heldModel{entered: make(chan struct{}, 1), release: make(chan struct{})}
	a := newAutoEnvWith(t, filepath.Join(t.TempDir(), "npcd.db"), model)
	c := brom()
	c.Model = "held"
	c.AutoTick = character.AutoTickSettings{Enabled: true, DebounceMS: 50, MaxWaitMS: 500}
	if _, err := a.eng.PutNPC(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	a.say(t, "Hello smith.")
	a.clock.Advance(50 * time.Millisecond)
	<-model.entered // the auto-tick is in its model call
	closed := make(chan error, 1)
	go func() { closed <- a.eng.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an auto-tick was running", err)
	default:
	}
	close(model.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := a.records(t); n != 1 {
		t.Errorf("tick records after Close = %d, want the auto-tick committed", n)
	}
	if r := a.wait(t); r == nil || r.Idle {
		t.Errorf("auto-tick = %+v, want it answered", r)
	}
}
