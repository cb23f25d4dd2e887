package journal

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/npcd/npcd/internal/int8vec"
	"github.com/npcd/npcd/llm"
)

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
	// Every block but the last is full and no larger than a block; the
	// last grows by doubling, so it holds at most twice its rows.
	for i, b := range s.blocks {
		if i < len(s.blocks)-1 && (len(b) != blockRows*d || cap(b) != blockRows*d) {
			t.Fatalf("block %d: %d values in a capacity of %d, want %d in %d", i, len(b), cap(b), blockRows*d, blockRows*d)
		}
		if cap(b) > blockRows*d || cap(b) > 2*len(b) {
			t.Fatalf("block %d: capacity %d for %d values", i, cap(b), len(b))
		}
	}
	if got, min := s.bytes(), int64(want*d*4); got < min {
		t.Fatalf("bytes %d, below the %d the rows hold", got, min)
	}
}

// dotRun, called until a scan's end, gives each row's inner product with
// the query exactly as a call of int8vec.Dot on the row would, for spans
// that start and end inside blocks, cross several, and hold a single row;
// each run stays within one block.
func TestDotRun(t *testing.T) {
	for _, d := range []int{7, 100, 256} {
		var s rowStore[int8]
		s.reset(d)
		const n = 3*blockRows + 21
		s.grow(n)
		for p := range n {
			for j := range s.row(p) {
				s.row(p)[j] = int8((p*31 + j*7) % 251)
			}
		}
		q := make([]int8, d)
		for j := range q {
			q[j] = int8(j*13 - 90)
		}
		for _, span := range [][2]int{{0, n}, {5, 6}, {blockRows - 1, blockRows + 1}, {10, 2*blockRows + 3}, {n - 1, n}} {
			lo, hi := span[0], span[1]
			var dots [blockRows]int32
			for i := lo; i < hi; {
				k := dotRun(&s, q, i, hi, &dots)
				if k <= 0 || i+k > hi || i/blockRows != (i+k-1)/blockRows {
					t.Fatalf("d=%d [%d,%d): run of %d rows from %d", d, lo, hi, k, i)
				}
				for j, v := range dots[:k] {
					if want := int8vec.Dot(q, s.row(i+j)); v != want {
						t.Fatalf("d=%d [%d,%d): row %d %d, want %d", d, lo, hi, i+j, v, want)
					}
				}
				i += k
			}
		}
	}
}

// A local lexical embedder writes the vectors of new messages straight into
// the index's rows: each row holds, to the bit, what storing the
// embedder's vector would (setVec), once the index knows its dimensions
// and after.
func TestEmbedInPlaceStoresWhatSetVecWould(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	r := e.retriever(t)
	ctx := context.Background()
	emb := r.embedder.(*llm.OfflineEmbedder)
	for round := 0; round < 3; round++ {
		var texts []string
		for i := 0; i < 70; i++ {
			texts = append(texts, fmt.Sprintf("alice says: round %d, line %d: the Smith's blue-steel sword, ÉTÉ, naïve café %d", round, i, i*i))
		}
		e.say(t, "brom", t0, texts, nil)
		x, err := r.acquire(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		waiting := maps.Clone(x.pending)
		if len(waiting) < len(texts) {
			r.release(x)
			t.Fatalf("round %d: %d items wait for a vector, want at least %d", round, len(waiting), len(texts))
		}
		if _, err := r.embedPending(ctx, x, "", len(waiting)); err != nil {
			r.release(x)
			t.Fatal(err)
		}
		for p, text := range waiting {
			want := make([]int8, x.dims)
			scale := quantize(want, emb.Vector(text))
			if got := x.vecs.row(int(p)); !slices.Equal(got, want) || x.vecScale[p] != scale || scale == 0 {
				r.release(x)
				t.Fatalf("round %d, item %d: codes %v scale %v, want %v scale %v", round, p, got, x.vecScale[p], want, scale)
			}
			if _, still := x.pending[p]; still {
				r.release(x)
				t.Fatalf("round %d: item %d still waits for its vector", round, p)
			}
		}
		r.release(x)
	}
}

// position finds every item by kind and id: journal entries and messages
// added in id order through their sorted lists, one added out of order
// through the fallback, memories whatever their order; and nothing for an
// id or kind never added.
func TestIndexPosition(t *testing.T) {
	x := newIndex("brom")
	type added struct {
		kind itemKind
		id   int64
	}
	var all []added
	for _, a := range []added{{kindMessage, 10}, {kindMemory, 7}, {kindJournal, 3}, {kindMessage, 12}, {kindMemory, 2},
		{kindMessage, 11}, {kindJournal, 9}, {kindMessage, 40}, {kindJournal, 4}, {kindMemory, 30}} {
		x.add(item{id: a.id, kind: a.kind}, "a line")
		all = append(all, a)
	}
	for p, a := range all {
		if got, ok := x.position(a.kind, a.id); !ok || got != int32(p) {
			t.Errorf("position(%v, %d) = %d, %v; want %d", a.kind, a.id, got, ok, p)
		}
	}
	if len(x.unordered) != 2 {
		t.Errorf("%d items kept out of the sorted lists, want 2 (message 11, journal 4)", len(x.unordered))
	}
	for _, a := range []added{{kindMessage, 7}, {kindMessage, 13}, {kindMessage, 41}, {kindJournal, 10}, {kindMemory, 3}, {kindMemory, 0}} {
		if p, ok := x.position(a.kind, a.id); ok {
			t.Errorf("position(%v, %d) = %d, found: never added", a.kind, a.id, p)
		}
	}
}
