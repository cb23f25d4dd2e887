package tick

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/npcd/npcd/lease"
)

// leasedEnv is one daemon's engine over the database at path, with its own
// lease manager.
func leasedEnv(t testing.TB, path, holder string) (*testEnv, *lease.Manager) {
	t.Helper()
	var m *lease.Manager
	env := openEnvDeps(t, path, nil, 0, func(d *Deps) {
		var err error
		if m, err = lease.New(d.DB, lease.Config{Holder: holder, Wait: 50 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		d.Leases = m
	})
	return env, m
}

// Two engines on one database: the one that holds an NPC's lease ticks it,
// the other is refused (busy) and consumes nothing, until the lease is let
// go; the first then finds its cached history dropped, since the second
// wrote meanwhile.
func TestLeaseGivesEachNPCOneEngine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "npcd.db")
	a, ma := leasedEnv(t, path, "a")
	b, mb := leasedEnv(t, path, "b")
	ctx := context.Background()
	if _, err := a.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	// Events go in through either daemon: no lease needed.
	if _, _, err := b.eng.PostEvents(ctx, "brom", []EventInput{{ID: "e1", Kind: "say", Actor: "alice", Text: "Good morning, Brom."}}); err != nil {
		t.Fatal(err)
	}
	_, err := b.eng.Tick(ctx, "brom")
	var be *lease.BusyError
	if !errors.As(err, &be) {
		t.Fatalf("tick on the daemon without the lease: %v, want *lease.BusyError", err)
	}
	// An implicit batch reports the NPC busy at once.
	_, bad, err := b.eng.TickMany(ctx, nil)
	if err != nil || len(bad) != 1 || !errors.As(bad[0].Err, &be) {
		t.Fatalf("batch on the daemon without the lease: %v %v, want brom busy", bad, err)
	}
	res, err := a.eng.Tick(ctx, "brom")
	if err != nil || res.Idle || res.Events != 1 {
		t.Fatalf("tick on the holder: %+v %v, want the event consumed", res, err)
	}
	if _, ok := a.eng.history.npcs["brom"]; !ok {
		t.Fatal("the holder keeps no history after its tick; the test cannot tell a drop")
	}
	// a stops: b takes the NPC at once and ticks it.
	if err := ma.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.eng.PostEvents(ctx, "brom", []EventInput{{ID: "e2", Kind: "say", Actor: "alice", Text: "Is the forge hot?"}}); err != nil {
		t.Fatal(err)
	}
	if res, err = b.eng.Tick(ctx, "brom"); err != nil || res.Events != 1 {
		t.Fatalf("tick on b after a let go: %+v %v", res, err)
	}
	if err := mb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cached := true
	if err := a.eng.WithNPCLock(ctx, "brom", func(context.Context) error {
		_, cached = a.eng.history.npcs["brom"]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if cached {
		t.Error("a took the lease back after b held it and kept its cached history")
	}
	n, err := a.chars.PendingTotal(ctx)
	if err != nil || n != 0 {
		t.Errorf("pending events = %d (%v), want 0", n, err)
	}
}
