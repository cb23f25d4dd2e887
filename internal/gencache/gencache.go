package gencache

// Cache is a cache of at most two generations of Bound entries. The zero
// value holds nothing and needs a bound (New). It is not safe for
// concurrent use: its users lock around it, Get alone allowing readers at
// once.
type Cache[K comparable, V any] struct {
	newer, older map[K]V
	bound        int
}

// New returns a cache of two generations of bound entries each.
func New[K comparable, V any](bound int) Cache[K, V] {
	return Cache[K, V]{bound: bound}
}

// Get returns the value of k, whether the newer generation holds it
// (fresh), and whether either does. A value that is not fresh should be
// put again (Put) for the cache to keep it; Get itself changes nothing.
func (c *Cache[K, V]) Get(k K) (v V, fresh, ok bool) {
	if v, ok := c.newer[k]; ok {
		return v, true, true
	}
	v, ok = c.older[k]
	return v, false, ok
}

// Put adds v as the value of k to the newer generation, starting a new
// generation first when the newer one is full.
func (c *Cache[K, V]) Put(k K, v V) {
	if c.newer == nil || len(c.newer) >= c.bound {
		c.older, c.newer = c.newer, make(map[K]V, max(c.bound/8, 1))
	}
	c.newer[k] = v
}

// Len returns how many entries each generation holds.
func (c *Cache[K, V]) Len() (newer, older int) { return len(c.newer), len(c.older) }
