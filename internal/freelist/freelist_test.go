package freelist

import (
	"sync"
	"testing"
)

// A List gives back what was put last first, keeps no more than the bound
// it is given, and holds nothing it gave out.
func TestListKeepsABoundedStack(t *testing.T) {
	var l List[*int]
	if v, ok := l.Get(); ok || v != nil {
		t.Fatalf("an empty list gave %v, %v", v, ok)
	}
	vals := []int{1, 2, 3}
	if !l.Put(&vals[0], 2) || !l.Put(&vals[1], 2) {
		t.Fatal("a value was refused under a bound of 2")
	}
	if l.Put(&vals[2], 2) || l.Len() != 2 {
		t.Fatalf("a third value was kept under a bound of 2 (%d kept)", l.Len())
	}
	if v, ok := l.Get(); !ok || v != &vals[1] {
		t.Fatalf("got %v, want the value put last (%v)", v, &vals[1])
	}
	if l.free[:2][1] != nil {
		t.Error("the list still holds the value it gave out")
	}
	if v, ok := l.Get(); !ok || v != &vals[0] || l.Len() != 0 {
		t.Fatalf("got %v, %v, leaving %d", v, ok, l.Len())
	}
	if l.Put(&vals[0], 0) {
		t.Error("a value was kept under a bound of 0")
	}
}

// Borrowers running at once never get the same value.
func TestListLendsEachValueOnce(t *testing.T) {
	var l List[*int]
	for i := 0; i < 4; i++ {
		l.Put(new(int), 8)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				v, ok := l.Get()
				if !ok {
					v = new(int)
				}
				*v++ // the race detector tells a value lent twice
				*v--
				l.Put(v, 8)
			}
		}()
	}
	wg.Wait()
	if n := l.Len(); n < 4 || n > 8 {
		t.Errorf("%d values kept, want between the 4 put and the bound of 8", n)
	}
}
