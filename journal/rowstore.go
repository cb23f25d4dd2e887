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
//
// A full block of int8 codes may be packed (packBlock): held as its nonzero
// codes only, its entry in blocks nil and in packed set. row must not be
// called for its rows; readRow and dotRun read them.
type rowStore[T float32 | int8] struct {
	dims   int
	n      int // rows held
	blocks [][]T
	packed []*packedRows // by block, nil for a block held whole; nil while none is packed
}

// packedRows is a block of rows held as their nonzero codes: row r's are
// at places idx[off[r]:off[r+1]] of the row, with values val at the same
// places of val. The offline embedder sets some 40 to 80 of its 256
// dimensions for a message, so a packed row holds 80 to 160 bytes of 256.
// Its products cost about a nanosecond per code set: some 70 ns of CPU a
// row of 66 codes, where int8vec's vector instructions take 30 for the
// row whole (BenchmarkScan100k).
type packedRows struct {
	off [blockRows + 1]uint16
	idx []uint8
	val []int8
}

// maxPackedDims is the most dimensions a store packs: a code's place must
// fit in a byte. A model's embeddings have more, and are held whole.
const maxPackedDims = 256

// packedOverhead is what a packed block holds beside its codes: the
// struct and its entry in packed.
const packedOverhead = int64(unsafe.Sizeof(packedRows{})) + 8

// dots writes into out the inner products of q, the whole query of at
// most maxPackedDims codes, with rows o, o+1, … of the block: sums of
// integers, the same as int8vec.Dot on the rows whole. The query is spread
// on an array a code's place indexes without a check.
func (pk *packedRows) dots(q []int8, o int, out []int32) {
	var qa [maxPackedDims]int8
	copy(qa[:], q)
	k, end := int(pk.off[o]), int(pk.off[o+len(out)])
	idx, val := pk.idx[:end], pk.val[:end]
	for r := range out {
		stop := int(pk.off[o+r+1])
		var s0, s1 int32
		for ; k+1 < stop; k += 2 {
			s0 += int32(qa[idx[k]]) * int32(val[k])
			s1 += int32(qa[idx[k+1]]) * int32(val[k+1])
		}
		if k < stop {
			s0 += int32(qa[idx[k]]) * int32(val[k])
			k++
		}
		out[r] = s0 + s1
	}
}

// bytes is what pk holds.
func (pk *packedRows) bytes() int64 {
	return packedOverhead + int64(cap(pk.idx)+cap(pk.val))
}

// packedAt returns the packed form of row p's block, nil when it is held
// whole.
func (s *rowStore[T]) packedAt(p int) *packedRows {
	if b := p / blockRows; b < len(s.packed) {
		return s.packed[b]
	}
	return nil
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
		if last < 0 || len(s.blocks[last]) == blockRows*d || s.packedAt(last*blockRows) != nil {
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
	for _, pk := range s.packed {
		if pk != nil {
			n += pk.bytes()
		}
	}
	return n + int64(cap(s.packed))*8
}

// release frees block b, whose rows the store no longer holds (row must not
// be called for them), and returns the bytes it held.
func (s *rowStore[T]) release(b int) int64 {
	var zero T
	n := int64(cap(s.blocks[b])) * int64(unsafe.Sizeof(zero))
	s.blocks[b] = nil
	if b < len(s.packed) && s.packed[b] != nil {
		n += s.packed[b].bytes()
		s.packed[b] = nil
	}
	return n
}

// packBlock holds block b of s, which must be full and held whole, as its
// nonzero codes when that takes at most two thirds of its bytes, and
// returns the bytes it freed (0 when it stays whole). Only a store of at
// most maxPackedDims dimensions packs.
func packBlock(s *rowStore[int8], b int) int64 {
	d := s.dims
	rows := s.blocks[b]
	if d > maxPackedDims || len(rows) != blockRows*d {
		return 0
	}
	nz := 0
	for _, c := range rows {
		if c != 0 {
			nz++
		}
	}
	whole, packed := int64(cap(rows)), packedOverhead+2*int64(nz)
	if packed > whole*2/3 {
		return 0
	}
	pk := &packedRows{idx: make([]uint8, 0, nz), val: make([]int8, 0, nz)}
	for r := range blockRows {
		for j, c := range rows[r*d : (r+1)*d] {
			if c != 0 {
				pk.idx = append(pk.idx, uint8(j))
				pk.val = append(pk.val, c)
			}
		}
		pk.off[r+1] = uint16(len(pk.idx))
	}
	if len(s.packed) < len(s.blocks) {
		s.packed = append(s.packed, make([]*packedRows, len(s.blocks)-len(s.packed))...)
	}
	s.packed[b], s.blocks[b] = pk, nil
	return whole - packed
}

// unpackBlock holds packed block b of s whole again, for its rows to be
// written.
func unpackBlock(s *rowStore[int8], b int) {
	pk, d := s.packed[b], s.dims
	rows := make([]int8, blockRows*d)
	for r := range blockRows {
		pk.unpack(r, rows[r*d:(r+1)*d])
	}
	s.blocks[b], s.packed[b] = rows, nil
}

// unpack writes row r's codes into row, which holds zeros.
func (pk *packedRows) unpack(r int, row []int8) {
	lo, hi := int(pk.off[r]), int(pk.off[r+1])
	for k, j := range pk.idx[lo:hi] {
		row[j] = pk.val[lo+k]
	}
}

// readRow returns row p of s for reading: the row itself when its block is
// held whole, else its codes written into buf, which has room for them.
func readRow(s *rowStore[int8], p int, buf []int8) []int8 {
	pk := s.packedAt(p)
	if pk == nil {
		return s.row(p)
	}
	buf = buf[:s.dims]
	clear(buf)
	pk.unpack(p%blockRows, buf)
	return buf
}

// dotRun writes into dots the inner products of q with rows lo, lo+1, …
// of s, up to the end of lo's block or to hi, and returns how many: one
// call of int8vec.DotRows, or of packedRows.dots for a packed block. A
// scan calls it until it reaches hi.
func dotRun(s *rowStore[int8], q []int8, lo, hi int, dots *[blockRows]int32) int {
	d := s.dims
	o := lo % blockRows
	k := min(hi-lo, blockRows-o)
	if pk := s.packedAt(lo); pk != nil {
		pk.dots(q, o, dots[:k])
		return k
	}
	int8vec.DotRows(q, s.blocks[lo/blockRows][o*d:], dots[:k])
	return k
}
