package gencache

import "testing"

// An entry put again whenever it is found in the older generation stays
// while many others pass through; one put once is gone two generations
// later; neither generation outgrows the bound.
func TestCacheKeepsRecurringEntries(t *testing.T) {
	c := New[int, string](16)
	c.Put(-1, "recurring")
	for i := range 400 {
		c.Put(i, "other")
		if i%10 == 0 {
			v, fresh, ok := c.Get(-1)
			if !ok || v != "recurring" {
				t.Fatalf("after %d others the recurring entry is gone", i+1)
			}
			if !fresh {
				c.Put(-1, v)
			}
		}
		if n, o := c.Len(); n > 16 || o > 16 {
			t.Fatalf("%d + %d entries, over two generations of 16", n, o)
		}
	}
	if _, _, ok := c.Get(0); ok {
		t.Fatal("an entry put once, long ago, is still held")
	}
	if _, fresh, ok := c.Get(399); !ok || !fresh {
		t.Fatalf("the last entry put: held %v, fresh %v", ok, fresh)
	}
}
