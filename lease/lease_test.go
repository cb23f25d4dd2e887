package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"gorm.io/gorm"

	"github.com/npcd/npcd/internal/testdb"
	"github.com/npcd/npcd/lease"
)

const ttl = 15 * time.Second

// pair is two daemons' managers on one database and one fake clock.
func pair(t *testing.T) (db *gorm.DB, clock *clockwork.FakeClock, a, b *lease.Manager, lost *lostLog) {
	t.Helper()
	db = testdb.Open(t)
	clock = clockwork.NewFakeClockAt(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	lost = &lostLog{}
	var err error
	a, err = lease.New(db, lease.Config{TTL: ttl, Holder: "a", Clock: clock, Lost: lost.add})
	if err != nil {
		t.Fatal(err)
	}
	b, err = lease.New(db, lease.Config{TTL: ttl, Holder: "b", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return db, clock, a, b, lost
}

type lostLog struct {
	mu  sync.Mutex
	ids []string
}

func (l *lostLog) add(id string) { l.mu.Lock(); l.ids = append(l.ids, id); l.mu.Unlock() }

func (l *lostLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

func hold(t *testing.T, m *lease.Manager, id string) (release func(), fresh bool) {
	t.Helper()
	release, fresh, err := m.Hold(lease.NoWait(context.Background()), id)
	if err != nil {
		t.Fatalf("%s holds %s: %v", m.Holder(), id, err)
	}
	return release, fresh
}

func wantBusy(t *testing.T, m *lease.Manager, id string) *lease.BusyError {
	t.Helper()
	_, _, err := m.Hold(lease.NoWait(context.Background()), id)
	var be *lease.BusyError
	if !errors.As(err, &be) {
		t.Fatalf("%s holds %s: err = %v, want a *BusyError", m.Holder(), id, err)
	}
	if be.NPC != id || be.RetryAfter < time.Second || be.RetryAfter > ttl {
		t.Errorf("busy error = %+v, want npc %q and a Retry-After between 1s and the TTL", be, id)
	}
	return be
}

// One owner at a time; the other is told to come back when the lease
// expires; the holder uses its lease again without the database.
func TestOneOwnerAtATime(t *testing.T) {
	db, _, a, b, _ := pair(t)
	release, fresh := hold(t, a, "brom")
	if !fresh {
		t.Error("a lease this process never held is not fresh")
	}
	release()
	wantBusy(t, b, "brom")
	// With the row gone, a holder that still believes its lease is valid
	// does not look: proof the fast path reads nothing.
	if err := db.Exec("DELETE FROM npc_leases").Error; err != nil {
		t.Fatal(err)
	}
	release, fresh = hold(t, a, "brom")
	release()
	if fresh {
		t.Error("a lease held all along came back fresh")
	}
	if !a.Held("brom") || b.Held("brom") {
		t.Errorf("held: a %v, b %v; want a only", a.Held("brom"), b.Held("brom"))
	}
}

// A holder that dies (stops renewing) loses the lease at expiry, not
// before; the new owner sees it fresh, and the old one learns at its next
// renewal that it lost it.
func TestExpiryAndTakeover(t *testing.T) {
	_, clock, a, b, lost := pair(t)
	release, _ := hold(t, a, "brom")
	defer release() // in use all along: only the missed renewals lose it
	clock.Advance(ttl - time.Second)
	wantBusy(t, b, "brom")
	clock.Advance(time.Second)
	rb, fresh := hold(t, b, "brom")
	rb()
	if !fresh {
		t.Error("a lease taken over from another daemon is not fresh")
	}
	if err := a.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := lost.list(); len(got) != 1 || got[0] != "brom" {
		t.Errorf("lost = %v, want [brom]", got)
	}
	if a.Held("brom") {
		t.Error("a still believes it holds a lease b took")
	}
	wantBusy(t, a, "brom")
}

// Renewals keep a lease in use past its TTL.
func TestRenewalKeepsTheLease(t *testing.T) {
	_, clock, a, b, lost := pair(t)
	release, _ := hold(t, a, "brom")
	defer release()
	for i := 0; i < 6; i++ {
		clock.Advance(ttl / 3)
		if err := a.Renew(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	wantBusy(t, b, "brom")
	if got := lost.list(); len(got) != 0 {
		t.Errorf("lost = %v, want none", got)
	}
}

// An idle lease is released at a renewal, so another daemon takes the NPC
// at once; coming back after someone else held it is fresh, after no one
// did it is not.
func TestIdleRelease(t *testing.T) {
	_, clock, a, b, _ := pair(t)
	release, _ := hold(t, a, "brom")
	release()
	release() // twice is once
	clock.Advance(a.Config().Idle)
	if err := a.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.Held("brom") {
		t.Fatal("an idle lease was kept")
	}
	// Nobody took it: a's caches are still good.
	release, fresh := hold(t, a, "brom")
	release()
	if fresh {
		t.Error("taken again with no one in between, yet fresh")
	}
	clock.Advance(a.Config().Idle)
	if err := a.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	rb, _ := hold(t, b, "brom")
	rb()
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	release, fresh = hold(t, a, "brom")
	release()
	if !fresh {
		t.Error("taken again after b held it, yet not fresh")
	}
}

// A request for an NPC another daemon holds waits, and gets the lease as
// soon as that daemon lets it go.
func TestWaitForRelease(t *testing.T) {
	db := testdb.Open(t)
	a, err := lease.New(db, lease.Config{TTL: time.Minute, Holder: "a", Wait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b, err := lease.New(db, lease.Config{TTL: time.Minute, Holder: "b", Wait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ra, _ := hold(t, a, "brom")
	got := make(chan error, 1)
	go func() {
		rb, _, err := b.Hold(context.Background(), "brom")
		if err == nil {
			rb()
		}
		got <- err
	}()
	ra()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting for a released lease: %v", err)
	}
	if !b.Held("brom") {
		t.Error("b waited but does not hold the lease")
	}
}

func TestBadConfig(t *testing.T) {
	db := testdb.Open(t)
	for _, c := range []lease.Config{{TTL: time.Millisecond}, {TTL: time.Second, Renew: time.Second}, {Wait: -1}} {
		if _, err := lease.New(db, c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}
