package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/api"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
)

// postgresEnv names the PostgreSQL server the multi-daemon tests use: the
// DSN of a role that may create databases. Each test creates its own
// database there and drops it after.
const postgresEnv = "NPCD_TEST_POSTGRES"

// freshPostgres creates an empty database on the server named by
// NPCD_TEST_POSTGRES and returns its DSN and a connection to it; the test
// skips when the variable is unset.
func freshPostgres(t testing.TB) (string, *gorm.DB) {
	t.Helper()
	base := os.Getenv(postgresEnv)
	if base == "" {
		t.Skipf("%s is not set: this test needs a PostgreSQL server, e.g. %s=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable (CI sets it)", postgresEnv, postgresEnv)
	}
	ctx := context.Background()
	admin, err := store.Open(ctx, base, store.Options{Driver: store.DriverPostgres})
	if err != nil {
		t.Fatalf("%s: %v", postgresEnv, err)
	}
	name := fmt.Sprintf("lease_two_daemons_%d_%d", os.Getpid(), time.Now().UnixNano())
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		store.Close(admin)
		t.Fatalf("create database %s: %v", name, err)
	}
	dsn := base + " dbname=" + name
	if u, err := url.Parse(base); err == nil && strings.HasPrefix(u.Scheme, "postgres") {
		u.Path = "/" + name
		dsn = u.String()
	}
	db, err := store.Open(ctx, dsn, store.Options{Driver: store.DriverPostgres})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		store.Close(db)
		if err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error; err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		store.Close(admin)
	})
	return dsn, db
}

// duo is the two daemons' run: what they acknowledged, to check the
// database against.
type duo struct {
	led                  *ledger
	okTicks, busy, fails atomic.Int64
	bAlive               atomic.Bool
}

// TestTwoDaemonsShareOneDatabase runs two `npcd serve` processes on one
// PostgreSQL database with sleeps every minute, drives both with events and
// single and batch ticks for the same NPCs, SIGKILLs one mid-run, and
// checks that every accepted event was consumed exactly once and none was
// lost, that each NPC slept once in the minute both daemons were up, that
// no memory is stored twice, and that the survivor took over the NPCs the
// killed daemon held once their leases expired.
func TestTwoDaemonsShareOneDatabase(t *testing.T) {
	dsn, db := freshPostgres(t)
	bin := buildDaemon(t)
	const ttl = 2 * time.Second
	env := []string{"NPCD_DB_DRIVER=postgres", "NPCD_LEASE_TTL=" + ttl.String(), "NPCD_SLEEP_CRON=* * * * *"}
	npcs := []string{"duo-0", "duo-1", "duo-2", "duo-3", "duo-4", "duo-5"}
	// a migrates the database and creates the NPCs; b starts on it and
	// schedules them too.
	a := startBinary(t, bin, dsn, env...)
	for _, id := range npcs {
		a.put(t, id)
	}
	b := startBinary(t, bin, dsn, env...)
	run := &duo{led: newLedger()}
	run.bAlive.Store(true)

	// The next minute both daemons sleep every NPC: at least 5s away, so
	// both have armed their schedules.
	start := time.Now()
	slot := start.Truncate(time.Minute).Add(time.Minute)
	if slot.Sub(start) < 5*time.Second {
		slot = slot.Add(time.Minute)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.drive(ctx, w, a, b, npcs)
		}()
	}
	time.Sleep(time.Until(slot.Add(8 * time.Second)))

	// Each NPC slept once in the slot, on one daemon or the other (and once
	// in the slot before, when both daemons were up for it already).
	deadline := slot.Add(50 * time.Second)
	sleeps := 0
	for _, id := range npcs {
		var runs []sleep.Run
		for {
			var err error
			if runs, err = sleep.Runs(context.Background(), db, id); err != nil {
				t.Fatal(err)
			}
			done := len(runs) > 0 && runs[len(runs)-1].Slot == slot.Unix()
			for _, r := range runs {
				done = done && r.FinishedAt != nil
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: sleep runs %+v, want one finished in the slot %v\nA:\n%s\nB:\n%s", id, runs, slot.UTC(), a.logTail(), b.logTail())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(runs) > 2 {
			t.Errorf("%s: sleep runs %+v, want one per slot since it was created", id, runs)
		}
		a.mu.Lock()
		b.mu.Lock()
		n := a.slept[id] + b.slept[id]
		b.mu.Unlock()
		a.mu.Unlock()
		if n != len(runs) {
			t.Errorf("%s: the daemons' logs report %d sleeps, sleep_runs %d: %+v", id, n, len(runs), runs)
		}
		sleeps += n
	}

	// b holds at least one NPC when it dies.
	for i := 0; ; i++ {
		var res api.TickResult
		code, err := b.do(context.Background(), "POST", "/v1/npcs/duo-0/tick", "", &res)
		if err == nil && code == 200 {
			break
		}
		if i > 100 {
			t.Fatalf("b never got duo-0: %d %v", code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var held []string
	pid := fmt.Sprintf("/%d/", b.cmd.Process.Pid)
	if err := db.Raw("SELECT npc_id FROM npc_leases WHERE holder LIKE ? AND expires_at > ?", "%"+pid+"%", time.Now().UnixMilli()).Scan(&held).Error; err != nil {
		t.Fatal(err)
	}
	if len(held) == 0 {
		t.Fatal("b holds no lease just after its tick")
	}
	run.bAlive.Store(false)
	b.kill(t)
	killed := time.Now()

	// a takes over what b held, while the drivers go on: each such NPC
	// ticks on a once its lease expired.
	var takeover time.Duration
	for _, id := range held {
		ref := "takeover-" + id
		body := fmt.Sprintf(`{"events": [{"id": %q, "kind": "say", "actor": "alice", "text": "Brom, are you there?"}]}`, ref)
		var acc api.EventsAccepted
		if code := a.call(t, "POST", "/v1/npcs/"+id+"/events", body, &acc); code != 202 || acc.Accepted != 1 {
			t.Fatalf("%s takes no event on a: %d %+v", id, code, acc)
		}
		run.led.accept(id, ref)
		for i := 0; ; i++ {
			var res api.TickResult
			code := a.call(t, "POST", "/v1/npcs/"+id+"/tick", "", &res)
			if code == 200 {
				takeover = max(takeover, time.Since(killed))
				break
			}
			if code != 409 || i > 100 {
				t.Fatalf("a does not take over %s from the killed daemon: %d\n%s", id, code, a.logTail())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	time.Sleep(time.Until(killed.Add(3 * ttl)))
	stop()
	wg.Wait()

	// Drain every inbox on a, then stop it: nothing accepted may be pending.
	for i := 0; ; i++ {
		var res api.BatchTickResponse
		if code := a.call(t, "POST", "/v1/tick", `{}`, &res); code != 200 {
			t.Fatalf("draining tick = %d", code)
		}
		if len(res.Results) == 0 && len(res.Errors) == 0 {
			break
		}
		if i > 500 {
			t.Fatalf("the inboxes never drained: %+v", res.Errors)
		}
		if len(res.Errors) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	a.stop(t)
	led := run.led
	for _, p := range led.problems {
		t.Error(p)
	}
	checkShared(t, db, led, npcs)
	t.Logf("two daemons: %d events accepted (%d more unanswered, posted as b died): %d consumed exactly once, %d pending, %d lost; "+
		"%d ticks answered, %d answers 409 npc_busy; %d NPCs slept once per slot (%d sleeps in all); "+
		"b held %d NPCs when killed, a ticked them all %.1fs after the kill (lease TTL %s)",
		led.accepted(), len(led.unsure), led.consumed, led.pending, led.lost, run.okTicks.Load(), run.busy.Load(),
		len(npcs), sleeps, len(held), takeover.Seconds(), ttl)
}

// drive posts events and ticks to both daemons (only a once b is dead)
// until ctx ends: single ticks, batches naming NPCs, and batches of
// whatever is pending.
func (r *duo) drive(ctx context.Context, w int, a, b *daemon, npcs []string) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	pick := func() *daemon {
		if r.bAlive.Load() && rng.IntN(2) == 1 {
			return b
		}
		return a
	}
	for n := 0; ctx.Err() == nil; n++ {
		id := npcs[rng.IntN(len(npcs))]
		d := pick()
		var evs []string
		var refs []string
		for k := 0; k <= rng.IntN(2); k++ {
			ref := fmt.Sprintf("w%d-%d-%d", w, n, k)
			refs = append(refs, ref)
			evs = append(evs, fmt.Sprintf(`{"id": %q, "kind": "say", "actor": "alice", "text": "Message %s: the price of iron is %d."}`, ref, ref, rng.IntN(100)))
		}
		var acc api.EventsAccepted
		code, err := d.do(context.Background(), "POST", "/v1/npcs/"+id+"/events", `{"events": [`+strings.Join(evs, ",")+`]}`, &acc)
		switch {
		case err != nil && d == b && !r.bAlive.Load():
			r.led.mu.Lock()
			for _, ref := range refs {
				r.led.unsure[ref] = true
			}
			r.led.mu.Unlock()
		case err != nil || code != 202 || acc.Accepted != len(refs):
			r.led.problem("post to %s: %d %+v %v", id, code, acc, err)
		default:
			for _, ref := range refs {
				r.led.accept(id, ref)
			}
		}
		d = pick()
		switch k := rng.IntN(10); {
		case k < 5:
			r.count(d.do(context.Background(), "POST", "/v1/npcs/"+id+"/tick", "", nil))
		case k < 8:
			other := npcs[rng.IntN(len(npcs))]
			body := fmt.Sprintf(`{"npcs": [%q]}`, id)
			if other != id {
				body = fmt.Sprintf(`{"npcs": [%q, %q]}`, id, other)
			}
			r.batch(d, body)
		default:
			r.batch(d, `{}`)
		}
	}
}

func (r *duo) count(code int, err error) {
	switch {
	case err != nil:
		// b killed mid-request.
	case code == 200:
		r.okTicks.Add(1)
	case code == 409:
		r.busy.Add(1)
	default:
		r.fails.Add(1)
		r.led.problem("tick answered %d", code)
	}
}

func (r *duo) batch(d *daemon, body string) {
	var res api.BatchTickResponse
	code, err := d.do(context.Background(), "POST", "/v1/tick", body, &res)
	if err != nil || code != 200 {
		r.count(code, err)
		return
	}
	r.okTicks.Add(int64(len(res.Results)))
	for _, e := range res.Errors {
		if e.Code != api.CodeNPCBusy {
			r.led.problem("batch tick of %s: %s %s", e.NPC, e.Code, e.Error)
			continue
		}
		r.busy.Add(1)
	}
}

// checkShared checks the database the daemons shared: every accepted event
// stored and consumed into exactly one message, nothing pending, nothing a
// daemon did not acknowledge, no memory stored twice.
func checkShared(t *testing.T, db *gorm.DB, led *ledger, npcs []string) {
	t.Helper()
	var dups int64
	if err := db.Raw(`SELECT count(*) FROM (SELECT character_id, content_hash FROM memories WHERE superseded_at IS NULL
		GROUP BY character_id, content_hash HAVING count(*) > 1) AS twice`).Row().Scan(&dups); err != nil {
		t.Fatal(err)
	}
	if dups > 0 {
		t.Errorf("%d memories are stored twice", dups)
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	for _, id := range npcs {
		rows, inMessages := storedEvents(t, db, id)
		stored := map[string]eventRow{}
		for _, r := range rows {
			stored[r.Ref] = r
			if !led.events[id][r.Ref] && !led.unsure[r.Ref] {
				t.Errorf("%s holds event %q no daemon acknowledged", id, r.Ref)
			}
			if n := inMessages[r.Ref]; r.ConsumedAt == nil || r.MessageID == nil || n != 1 {
				t.Errorf("%s: event %q consumed at %v into %d messages, want exactly one", id, r.Ref, r.ConsumedAt, n)
			}
		}
		for ref := range led.events[id] {
			if _, ok := stored[ref]; !ok {
				t.Errorf("%s lost accepted event %q", id, ref)
				led.lost++
				continue
			}
			if stored[ref].ConsumedAt == nil {
				led.pending++
			} else {
				led.consumed++
			}
		}
	}
	if led.consumed == 0 {
		t.Error("no event was consumed at all")
	}
}
