package keylock

import (
	"context"
	"sync"
)

// Map holds one lock per key: work under one key is serialized while
// different keys run in parallel. Entries live only while someone holds or
// waits for the lock, so the map does not grow with the number of keys ever
// seen. The zero value is not usable; call New.
type Map struct {
	mu    sync.Mutex
	locks map[string]*entry
}

type entry struct {
	ch   chan struct{} // holds one token while locked
	refs int
}

// New returns an empty Map.
func New() *Map { return &Map{locks: map[string]*entry{}} }

// Lock waits for id's lock or for ctx to end. On success it returns the
// function that releases the lock; otherwise ctx's error.
func (l *Map) Lock(ctx context.Context, id string) (func(), error) {
	l.mu.Lock()
	e := l.locks[id]
	if e == nil {
		e = &entry{ch: make(chan struct{}, 1)}
		l.locks[id] = e
	}
	e.refs++
	l.mu.Unlock()

	select {
	case e.ch <- struct{}{}:
		return func() {
			<-e.ch
			l.release(id, e)
		}, nil
	case <-ctx.Done():
		l.release(id, e)
		return nil, ctx.Err()
	}
}

func (l *Map) release(id string, e *entry) {
	l.mu.Lock()
	e.refs--
	if e.refs == 0 {
		delete(l.locks, id)
	}
	l.mu.Unlock()
}
