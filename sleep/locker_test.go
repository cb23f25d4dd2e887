package sleep_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/testdb"
	"github.com/npcd/npcd/lease"
	"github.com/npcd/npcd/sleep"
)

func TestSlotLockerTakesEachSlotOnce(t *testing.T) {
	db := testdb.Open(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 23, 3, 0, 0, 20e6, time.UTC))
	a := sleep.NewSlotLocker(db, "a", clock, nil)
	b := sleep.NewSlotLocker(db, "b", clock, nil)
	ctx := context.Background()
	job := sleep.JobName("brom")
	la, err := a.Lock(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx, job); !errors.Is(err, sleep.ErrSlotTaken) {
		t.Fatalf("second lock of the slot: %v, want ErrSlotTaken", err)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Finished is not free again: the slot was slept.
	clock.Advance(30 * time.Second)
	if _, err := b.Lock(ctx, job); !errors.Is(err, sleep.ErrSlotTaken) {
		t.Fatalf("lock after the slot's sleep finished: %v, want ErrSlotTaken", err)
	}
	// Another NPC's job is its own.
	if _, err := b.Lock(ctx, sleep.JobName("anna")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	lb, err := b.Lock(ctx, job)
	if err != nil {
		t.Fatalf("the next minute's slot: %v", err)
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	runs, err := sleep.Runs(ctx, db, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Holder != "a" || runs[1].Holder != "b" || runs[0].FinishedAt == nil || runs[1].FinishedAt == nil {
		t.Fatalf("runs = %+v, want two finished, by a then b", runs)
	}
}

// countingLocker counts lock attempts, taken or not.
type countingLocker struct {
	inner    gocron.Locker
	mu       sync.Mutex
	attempts int
	taken    int
}

func (c *countingLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	l, err := c.inner.Lock(ctx, key)
	c.mu.Lock()
	c.attempts++
	if err == nil {
		c.taken++
	}
	c.mu.Unlock()
	return l, err
}

func (c *countingLocker) counts() (attempts, taken int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts, c.taken
}

// Two schedulers with the same schedules on one database run each NPC's
// sleep once per slot between them.
func TestTwoSchedulersSleepEachNPCOncePerSlot(t *testing.T) {
	db := testdb.Open(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 23, 3, 0, 1, 0, time.UTC))
	var mu sync.Mutex
	runs := map[string]map[int64]int{} // npc → slot → sleeps
	total := 0
	sleeper := sleep.SleeperFunc(func(ctx context.Context, id string) (*sleep.Report, error) {
		mu.Lock()
		defer mu.Unlock()
		if runs[id] == nil {
			runs[id] = map[int64]int{}
		}
		runs[id][clock.Now().Truncate(time.Minute).Unix()]++
		total++
		return &sleep.Report{}, nil
	})
	npcs := []string{"anna", "bert", "cara"}
	var lockers []*countingLocker
	var scheds []*sleep.Scheduler
	for _, holder := range []string{"a", "b"} {
		l := &countingLocker{inner: sleep.NewSlotLocker(db, holder, clock, nil)}
		sc, err := sleep.NewScheduler(sleep.ScheduleConfig{Clock: clock, Locker: l}, sleeper)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range npcs {
			if err := sc.Schedule(&character.Character{ID: id, Sleep: character.SleepSettings{Cron: "* * * * *"}}); err != nil {
				t.Fatal(err)
			}
		}
		sc.Start()
		lockers, scheds = append(lockers, l), append(scheds, sc)
	}
	const slots = 4
	for slot := 1; slot <= slots; slot++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := clock.BlockUntilContext(ctx, 2*len(npcs)); err != nil {
			t.Fatalf("slot %d: the schedulers did not arm their timers", slot)
		}
		cancel()
		clock.Advance(time.Minute)
		want := 2 * len(npcs) * slot
		deadline := time.Now().Add(10 * time.Second)
		for {
			attempts, taken := 0, 0
			for _, l := range lockers {
				a, tk := l.counts()
				attempts, taken = attempts+a, taken+tk
			}
			mu.Lock()
			done := total
			mu.Unlock()
			if attempts == want && done == taken {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("slot %d: %d lock attempts of %d, %d sleeps of %d taken", slot, attempts, want, done, taken)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, sc := range scheds {
		if err := sc.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range npcs {
		if len(runs[id]) != slots {
			t.Errorf("%s slept in %d slots, want %d: %v", id, len(runs[id]), slots, runs[id])
		}
		for s, n := range runs[id] {
			if n != 1 {
				t.Errorf("%s slept %d times in the slot %v", id, n, time.Unix(s, 0).UTC())
			}
		}
		recorded, err := sleep.Runs(context.Background(), db, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(recorded) != slots {
			t.Errorf("%s: %d sleep_runs rows, want %d", id, len(recorded), slots)
		}
	}
}

// With NPC leases, the slot goes to the daemon holding the NPC: the other
// waits for it to take the slot, then leaves it; the holder keeps the NPC
// until the sleep ends.
func TestSlotGoesToTheLeaseHolder(t *testing.T) {
	db := testdb.Open(t)
	ctx := context.Background()
	var mu sync.Mutex
	holding := 0
	holder := func(ctx context.Context, id string) (func(), error) {
		mu.Lock()
		holding++
		mu.Unlock()
		return func() { mu.Lock(); holding--; mu.Unlock() }, nil
	}
	other := func(ctx context.Context, id string) (func(), error) {
		return nil, &lease.BusyError{NPC: id, RetryAfter: time.Second}
	}
	a := sleep.NewSlotLocker(db, "a", nil, other)
	b := sleep.NewSlotLocker(db, "b", nil, holder)
	job := sleep.JobName("brom")
	got := make(chan error, 1)
	go func() {
		_, err := a.Lock(ctx, job)
		got <- err
	}()
	lb, err := b.Lock(ctx, job)
	if err != nil {
		t.Fatalf("the holder's lock: %v", err)
	}
	if err := <-got; !errors.Is(err, sleep.ErrSlotTaken) {
		t.Fatalf("the other daemon's lock: %v, want ErrSlotTaken", err)
	}
	mu.Lock()
	if holding != 1 {
		t.Errorf("holds during the sleep = %d, want 1", holding)
	}
	mu.Unlock()
	if err := lb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if holding != 0 {
		t.Errorf("holds after the sleep = %d, want 0", holding)
	}
}
