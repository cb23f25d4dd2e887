package journal

import (
	"unsafe"

	"github.com/npcd/npcd/internal/int8vec"
)

// blockRows is how many rows one block of a rowStore holds once the store
// has outgrown its first block.
const blockRows = 64

// rowStore holds rows of dims values each (an item's vector), appended in
// item order, in blocks of blockRows rows. Appending never copies what the
// store holds beyond its last block: a single slice grown by append
// would copy every vector of a long-lived NPC again each time it grew,
// about four times each vector's size over its life. Each block grows by
// doubling up to blockRows rows, so a young NPC holds little, nor does a
// world of many NPCs hold the unused half of each one's last block.
type rowStore[T float32 | int8] struct {
	dims   int
	n      int // rows held
	blocks [][]T
}

// reset empties the store and sets its row size.
func (s *rowStore[T]) reset(dims int) {
	*s = rowStore[T]{dims: dims}
}

// len is the number of rows held.
func (s *rowStore[T]) len() int { return s.n }

// grow appends k zero rows.
func (s *rowStore[T]) grow(k int) {
	d := s.dims
	for k > 0 {
		last := len(s.blocks) - 1
		if last < 0 || len(s.blocks[last]) == blockRows*d {
			s.blocks = append(s.blocks, make([]T, 0, min(k, blockRows)*d))
			last++
		}
		b := s.blocks[last]
		add := min(k, blockRows-len(b)/d)
		if need := len(b) + add*d; need > cap(b) {
			nb := make([]T, len(b), min(max(need, 2*cap(b)), blockRows*d))
			copy(nb, b)
			b = nb
		}
		s.blocks[last] = b[:len(b)+add*d] // spare capacity is zero: never written
		s.n += add
		k -= add
	}
}

// row returns row p, which the caller may write.
func (s *rowStore[T]) row(p int) []T {
	d := s.dims
	o := (p % blockRows) * d
	return s.blocks[p/blockRows][o : o+d : o+d]
}

// bytes is what the store's blocks hold.
func (s *rowStore[T]) bytes() int64 {
	var n int64
	var zero T
	for _, b := range s.blocks {
		n += int64(cap(b)) * int64(unsafe.Sizeof(zero))
	}
	return n
}

// release frees block b, whose rows the store no longer holds (row must not
// be called for them), and returns the bytes it held.
func (s *rowStore[T]) release(b int) int64 {
	var zero T
	n := int64(cap(s.blocks[b])) * int64(unsafe.Sizeof(zero))
	s.blocks[b] = nil
	return n
}

// dotRun writes into dots the inner products of q with rows lo, lo+1, …
// of s, up to the end of lo's block or to hi, and returns how many: one
// call of int8vec.DotRows. A scan calls it until it reaches hi.
func dotRun(s *rowStore[int8], q []int8, lo, hi int, dots *[blockRows]int32) int {
	d := s.dims
	o := lo % blockRows
	k := min(hi-lo, blockRows-o)
	int8vec.DotRows(q, s.blocks[lo/blockRows][o*d:], dots[:k])
	return k
}
