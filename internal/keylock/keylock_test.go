package keylock

import (
	"context"
	"errors"
	"testing"
)

// One key is held by one at a time; other keys are free; a waiter gives up
// when its context ends; released entries leave the map.
func TestLock(t *testing.T) {
	l := New()
	ctx := context.Background()
	unlock, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := l.Lock(ctx, "b")
	if err != nil {
		t.Fatalf("another key: %v", err)
	}
	other()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Lock(cctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("held key with an ended context: err %v, want context.Canceled", err)
	}
	unlock()
	again, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatalf("released key: %v", err)
	}
	again()
	if n := len(l.locks); n != 0 {
		t.Fatalf("%d entries left after every lock was released", n)
	}
}
