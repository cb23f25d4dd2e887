package journal

import "testing"

// Rows keep what was written in them while the store grows past many
// blocks, one row or many at a time, and new rows start at zero.
func TestRowStoreGrowsWithoutLosingRows(t *testing.T) {
	const d = 3
	var s rowStore[float32]
	s.reset(d)
	want := 0
	for _, k := range []int{1, 1, 2, 5, blockRows - 9, 1, 3 * blockRows, 7, blockRows, 1} {
		s.grow(k)
		for p := want; p < want+k; p++ {
			for j, v := range s.row(p) {
				if v != 0 {
					t.Fatalf("new row %d holds %v at %d", p, v, j)
				}
			}
			for j := range s.row(p) {
				s.row(p)[j] = float32(p*d + j)
			}
		}
		want += k
		if s.len() != want {
			t.Fatalf("%d rows, want %d", s.len(), want)
		}
		for p := 0; p < want; p++ {
			row := s.row(p)
			if len(row) != d || cap(row) != d {
				t.Fatalf("row %d: len %d cap %d", p, len(row), cap(row))
			}
			for j, v := range row {
				if v != float32(p*d+j) {
					t.Fatalf("row %d holds %v at %d after growing to %d rows", p, v, j, want)
				}
			}
		}
	}
	// Past the first block, blocks are allocated once, whole.
	for i, b := range s.blocks[1:] {
		if cap(b) != blockRows*d {
			t.Fatalf("block %d: capacity %d, want %d", i+1, cap(b), blockRows*d)
		}
	}
	if got, min := s.bytes(), int64(want*d*4); got < min {
		t.Fatalf("bytes %d, below the %d the rows hold", got, min)
	}
}
