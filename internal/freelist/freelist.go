package freelist

import "sync"

// List is a stack of values kept for reuse, safe for concurrent use. Its
// zero value is empty and ready to use.
type List[T any] struct {
	mu   sync.Mutex
	free []T
}

// Get takes the value kept last; ok is false when none is kept.
func (l *List[T]) Get() (v T, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.free)
	if n == 0 {
		return v, false
	}
	v = l.free[n-1]
	var zero T
	l.free[n-1] = zero // the array holds nothing it gave out
	l.free = l.free[:n-1]
	return v, true
}

// Put keeps v unless max values are kept already, and reports whether it
// did.
func (l *List[T]) Put(v T, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) >= max {
		return false
	}
	l.free = append(l.free, v)
	return true
}

// Len is how many values are kept.
func (l *List[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.free)
}
