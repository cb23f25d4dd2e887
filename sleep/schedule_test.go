package sleep

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/npcd/npcd/character"
)

// countingSleeper records sleeps per NPC and the most that ever ran at once
// for one NPC.
type countingSleeper struct {
	mu       sync.Mutex
	runs     map[string]int
	inflight map[string]int
	maxPar   map[string]int
	block    map[string]chan struct{} // sleeps of these NPCs wait on the channel
	at       map[string][]time.Time
	clock    clockwork.Clock
}

func newCountingSleeper(clock clockwork.Clock) *countingSleeper {
	return &countingSleeper{runs: map[string]int{}, inflight: map[string]int{}, maxPar: map[string]int{}, block: map[string]chan struct{}{}, at: map[string][]time.Time{}, clock: clock}
}

func (s *countingSleeper) Sleep(ctx context.Context, id string) (*Report, error) {
	s.mu.Lock()
	s.inflight[id]++
	s.maxPar[id] = max(s.maxPar[id], s.inflight[id])
	s.at[id] = append(s.at[id], s.clock.Now())
	wait := s.block[id]
	s.mu.Unlock()
	if wait != nil {
		<-wait
	}
	s.mu.Lock()
	s.inflight[id]--
	s.runs[id]++
	s.mu.Unlock()
	return &Report{}, nil
}

func (s *countingSleeper) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[id]
}

func (s *countingSleeper) started(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at[id])
}

// waitFor polls cond in real time; scheduled jobs run on their own goroutines.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func npcWith(id, cron, tz string) *character.Character {
	return &character.Character{ID: id, Sleep: character.SleepSettings{Cron: cron, Timezone: tz}}
}

func TestScheduleAMonthOfNights(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	// One second past the hour, as a real clock always is when a timer
	// fires: with time frozen exactly on the boundary gocron may compute
	// the run it is in as the next one and start it again.
	start := time.Date(2026, 11, 1, 0, 0, 1, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(start)
	sl := newCountingSleeper(clock)
	sc, err := NewScheduler(ScheduleConfig{Clock: clock}, sl)
	if err != nil {
		t.Fatal(err)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	npcs := []*character.Character{
		npcWith("anna", "", ""),                       // the world default: 03:00 UTC
		npcWith("bert", "0 22 * * *", "Europe/Paris"), // 22:00 in Paris
		npcWith("cara", "30 1 * * *", "UTC"),
	}
	if err := sc.Restore([]character.Character{*npcs[0], *npcs[1], *npcs[2]}); err != nil {
		t.Fatal(err)
	}
	sc.Start()
	// want holds the nights each NPC must have slept, by their start time.
	want := map[string][]time.Time{}
	for step := 1; step <= 30*48; step++ { // half-hours
		now := start.Add(time.Duration(step) * 30 * time.Minute)
		switch step {
		case 10 * 48: // day 10: bert goes to bed at noon UTC from now on
			npcs[1].Sleep = character.SleepSettings{Cron: "0 12 * * *", Timezone: "UTC"}
			if err := sc.Schedule(npcs[1]); err != nil {
				t.Fatal(err)
			}
		case 20 * 48: // day 20: cara is deleted
			sc.Unschedule("cara")
		}
		clock.Advance(30 * time.Minute)
		onHour := now.Minute() == 0
		if onHour && now.UTC().Hour() == 3 {
			want["anna"] = append(want["anna"], now)
		}
		if onHour && (step < 10*48 && now.In(paris).Hour() == 22 || step >= 10*48 && now.UTC().Hour() == 12) {
			want["bert"] = append(want["bert"], now)
		}
		if step < 20*48 && now.UTC().Hour() == 1 && now.Minute() == 30 {
			want["cara"] = append(want["cara"], now)
		}
		for _, id := range []string{"anna", "bert", "cara"} {
			n := len(want[id])
			waitFor(t, fmt.Sprintf("%s's sleep number %d by %v", id, n, now), func() bool { return sl.count(id) >= n })
		}
		// The fake clock jumps; let the scheduler set every next timer
		// before it moves again, as the real clock would.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := clock.BlockUntilContext(ctx, sc.Len()); err != nil {
			t.Fatalf("at %v: the scheduler did not rearm its %d timers", now, sc.Len())
		}
		cancel()
	}
	if err := sc.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for id, nights := range want {
		// Every night once at its time, nothing at any other time.
		if diff := cmp.Diff(nights, sl.at[id]); diff != "" {
			t.Errorf("%s slept at the wrong times (-want +got):\n%s", id, diff)
		}
		if sl.maxPar[id] != 1 {
			t.Errorf("%s: %d sleeps ran at once", id, sl.maxPar[id])
		}
	}
	if len(want["anna"]) != 30 || len(want["cara"]) != 20 || len(want["bert"]) != 30 {
		t.Fatalf("expected nights miscounted: %d %d %d", len(want["anna"]), len(want["bert"]), len(want["cara"]))
	}
	if _, ok := sc.NextRun("cara"); ok || sc.Len() != 2 {
		t.Errorf("cara still scheduled after deletion (jobs %d)", sc.Len())
	}
}

func TestScheduledSleepsNeverOverlap(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 1, 0, 0, 30, 0, time.UTC))
	sl := newCountingSleeper(clock)
	release := make(chan struct{})
	sl.block["dora"] = release
	sc, err := NewScheduler(ScheduleConfig{Clock: clock}, sl)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Schedule(npcWith("dora", "* * * * *", "UTC")); err != nil {
		t.Fatal(err)
	}
	sc.Start()
	clock.Advance(time.Minute) // the first run starts and blocks
	waitFor(t, "the first sleep to start", func() bool { return sl.started("dora") == 1 })
	clock.Advance(time.Minute) // due again while the first still runs
	clock.Advance(time.Minute)
	time.Sleep(50 * time.Millisecond)
	if n := sl.started("dora"); n != 1 {
		t.Fatalf("%d sleeps of dora started while one was running", n)
	}
	close(release)
	waitFor(t, "the queued sleep", func() bool { return sl.count("dora") >= 2 })
	sl.mu.Lock()
	maxPar := sl.maxPar["dora"]
	sl.mu.Unlock()
	if maxPar != 1 {
		t.Fatalf("%d sleeps of dora ran at once", maxPar)
	}
	if err := sc.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

func TestScheduleRefusesBadSettings(t *testing.T) {
	sc, err := NewScheduler(ScheduleConfig{Clock: clockwork.NewFakeClock()}, SleeperFunc(func(context.Context, string) (*Report, error) { return &Report{}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Shutdown()
	for _, c := range []*character.Character{
		npcWith("x", "every night", ""),
		npcWith("x", "0 25 * * *", ""),
		npcWith("x", "TZ=UTC 0 3 * * *", ""),
	} {
		err := sc.Schedule(c)
		var fe *character.FieldError
		if !errors.As(err, &fe) || fe.Field != "sleep.cron" {
			t.Errorf("cron %q: %v, want a sleep.cron field error", c.Sleep.Cron, err)
		}
	}
	if sc.Len() != 0 {
		t.Errorf("%d jobs scheduled from bad settings", sc.Len())
	}
	if _, err := NewScheduler(ScheduleConfig{DefaultCron: "nope"}, SleeperFunc(nil)); err == nil {
		t.Error("a bad default schedule was accepted")
	}
}

// One rule checks a sleep schedule, for the daemon and the scenario loader.
func TestCheckCron(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		expr, tz string
		ok       bool
	}{
		{"0 22 * * *", "UTC", true},
		{"30 6 * * 1-5", "Europe/Paris", true},
		{"0 25 * * *", "UTC", false},
		{"every night", "UTC", false},
		{"CRON_TZ=UTC 0 22 * * *", "UTC", false},
		{"0 22 * * *", "Mars/Olympus", false},
	} {
		if err := CheckCron(tt.expr, tt.tz, now); (err == nil) != tt.ok {
			t.Errorf("CheckCron(%q, %q) = %v, want ok %v", tt.expr, tt.tz, err, tt.ok)
		}
	}
}

// Sync schedules the NPCs it is given and unschedules the others.
func TestSyncFollowsTheStoredNPCs(t *testing.T) {
	clock := clockwork.NewFakeClock()
	sc, err := NewScheduler(ScheduleConfig{Clock: clock}, newCountingSleeper(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Shutdown()
	if err := sc.Sync([]character.Character{*npcWith("anna", "", ""), *npcWith("bert", "0 22 * * *", "UTC")}); err != nil {
		t.Fatal(err)
	}
	if err := sc.Sync([]character.Character{*npcWith("bert", "0 23 * * *", "UTC"), *npcWith("cara", "", "")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := sc.NextRun("anna"); ok || sc.Len() != 2 {
		t.Fatalf("after the second sync: anna scheduled %v, %d jobs; want anna gone and 2 jobs", ok, sc.Len())
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if got := sc.jobs["bert"].crontab; got != "CRON_TZ=UTC 0 23 * * *" {
		t.Errorf("bert's schedule = %q, want the changed one", got)
	}
}
