package gencache

// Cache is a cache of at most two generations, each of bound entries (or
// of entries whose sizes add up to bound, PutSized). The zero value holds
// nothing and needs a bound (New). It is not safe for concurrent use: its
// users lock around it, Get alone allowing readers at once.
type Cache[K comparable, V any] struct {
	newer, older map[K]V
	bound        int
	size         int // of the newer generation's entries, as put
	hint         int // entries a new generation's map is made for
}

// New returns a cache of two generations of bound entries each.
func New[K comparable, V any](bound int) Cache[K, V] {
	return Cache[K, V]{bound: bound, hint: max(bound/8, 1)}
}

// NewSized returns a cache of two generations of bound units of size each
// (PutSized), a generation's map made for entries entries at first.
func NewSized[K comparable, V any](bound, entries int) Cache[K, V] {
	return Cache[K, V]{bound: bound, hint: max(entries, 1)}
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
// generation first when the newer one is full: PutSized with size 1.
func (c *Cache[K, V]) Put(k K, v V) { c.PutSized(k, v, 1) }

// PutSized adds v as the value of k, of size units of the bound, to the
// newer generation, starting a new generation first when it would not fit
// in the newer one (an entry larger than the bound gets a generation of
// its own). A key put again counts again: the generation fills sooner,
// never later.
func (c *Cache[K, V]) PutSized(k K, v V, size int) {
	if c.newer == nil || (c.size+size > c.bound && len(c.newer) > 0) {
		c.older, c.newer, c.size = c.newer, make(map[K]V, c.hint), 0
	}
	c.newer[k] = v
	c.size += size
}

// Bound returns the bound of a generation.
func (c *Cache[K, V]) Bound() int { return c.bound }

// Len returns how many entries each generation holds.
func (c *Cache[K, V]) Len() (newer, older int) { return len(c.newer), len(c.older) }
