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

// Entries put with a size fill a generation by their sizes: the newer
// generation never holds more than the bound, a generation ends when the
// next entry would not fit, and an entry larger than the bound gets a
// generation of its own.
func TestPutSizedBoundsAGenerationBySize(t *testing.T) {
	c := NewSized[int, string](1000, 4)
	for i := range 300 {
		size := 10 + (i*37)%290 // 10 to 299
		c.PutSized(i, "v", size)
		if s := c.size; s > 1000 {
			t.Fatalf("after entry %d the newer generation holds %d units, over its bound of 1000", i, s)
		}
		if newer, _ := c.Len(); newer == 1 && c.size != size {
			t.Fatalf("a new generation of one entry of %d units holds %d", size, c.size)
		}
	}
	// 300 entries of 154 units on average: many generations went by.
	if _, _, ok := c.Get(0); ok {
		t.Fatal("the first entry is still held after many generations")
	}
	c.PutSized(-1, "big", 5000)
	if newer, _ := c.Len(); newer != 1 || c.size != 5000 {
		t.Fatalf("an entry over the bound: newer generation of %d entries and %d units, want itself alone", newer, c.size)
	}
	c.PutSized(-2, "small", 1)
	if newer, older := c.Len(); newer != 1 || older != 1 {
		t.Fatalf("after the large entry a small one: %d newer, %d older entries, want 1 and 1", newer, older)
	}
	if v, fresh, ok := c.Get(-1); !ok || fresh || v != "big" {
		t.Fatalf("the large entry: %q fresh %v held %v, want it in the older generation", v, fresh, ok)
	}
}
