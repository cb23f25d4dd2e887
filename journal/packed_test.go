package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/npcd/npcd/internal/int8vec"
)

// sparseRows appends n rows to s of codes of which about one in six is
// set, as the offline embedder's vectors of messages are, and returns a
// copy of each.
func sparseRows(s *rowStore[int8], n int, rng *rand.Rand) [][]int8 {
	from := s.len()
	s.grow(n)
	rows := make([][]int8, n)
	for i := range n {
		p := from + i
		row := s.row(p)
		for j := range row {
			if rng.IntN(6) == 0 {
				row[j] = int8(rng.IntN(255) - 127)
			}
		}
		rows[i] = slices.Clone(row)
	}
	return rows
}

// lines returns n perceived lines of 4 to 13 random words (chatter's are
// longer): the offline embedder sets 40 to 80 of its 256 dimensions for
// each, as it does for a line of conversation.
func lines(rng *rand.Rand, n int) []string {
	texts := chatter(rng, n)
	for i, t := range texts {
		words := strings.Fields(t)
		texts[i] = strings.Join(words[:min(len(words), 7+rng.IntN(10))], " ") + "\""
	}
	return texts
}

// A packed block reads as it was held whole: each row by readRow, its
// products with a query by dotRun, its codes written again after
// unpackBlock. The store counts what packing freed, a block of dense codes
// stays whole, the block after a packed last one starts anew, and a
// packed block released frees what it held.
func TestPackedBlocksReadAsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{40, 100, 256} {
		var s rowStore[int8]
		s.reset(d)
		const n = 4 * blockRows
		rows := sparseRows(&s, n, rng)
		// Block 2 is dense: every code set.
		for p := 2 * blockRows; p < 3*blockRows; p++ {
			for j := range s.row(p) {
				s.row(p)[j] = int8(p + j | 1)
			}
			rows[p] = slices.Clone(s.row(p))
		}
		q := make([]int8, d)
		for j := range q {
			q[j] = int8(rng.IntN(255) - 127)
		}
		before := s.bytes()
		var freed int64
		for b := range 4 {
			f := packBlock(&s, b)
			if packed := s.packedAt(b*blockRows) != nil; packed != (f > 0) || packed == (b == 2) {
				t.Fatalf("d=%d: block %d packed %v, freeing %d bytes", d, b, packed, f)
			}
			freed += f
		}
		if got := s.bytes(); got != before-freed+int64(cap(s.packed))*8 || freed < before/3 {
			t.Fatalf("d=%d: %d bytes after packing, %d before, %d freed", d, got, before, freed)
		}
		buf := make([]int8, d)
		check := func(when string) {
			t.Helper()
			for p, want := range rows {
				if got := readRow(&s, p, buf); !slices.Equal(got, want) {
					t.Fatalf("d=%d %s: row %d reads %v, want %v", d, when, p, got, want)
				}
			}
			var dots [blockRows]int32
			for i := 5; i < n-3; {
				k := dotRun(&s, q, i, n-3, &dots)
				for j, v := range dots[:k] {
					if want := int8vec.Dot(q, rows[i+j]); v != want {
						t.Fatalf("d=%d %s: row %d's product %d, want %d", d, when, i+j, v, want)
					}
				}
				i += k
			}
		}
		check("packed")
		// Rows added after a packed last block go to a block of their own.
		rows = append(rows, sparseRows(&s, 3, rng)...)
		if len(s.blocks) != 5 || s.packedAt(n) != nil {
			t.Fatalf("d=%d: %d blocks after growing past a packed one", d, len(s.blocks))
		}
		check("grown")
		unpackBlock(&s, 1)
		s.row(blockRows + 3)[0] = 99
		rows[blockRows+3][0] = 99
		check("unpacked and written")
		bytes, pk := s.bytes(), s.packed[3]
		if got := s.release(3); got != pk.bytes() || s.bytes() != bytes-got || s.packedAt(3*blockRows) != nil {
			t.Fatalf("d=%d: releasing a packed block freed %d of %d bytes", d, got, bytes)
		}
	}
	// A code's place must fit in a byte.
	var s rowStore[int8]
	s.reset(300)
	sparseRows(&s, blockRows, rng)
	if packBlock(&s, 0) != 0 || s.packedAt(0) != nil {
		t.Fatal("a block of 300 dimensions packed")
	}
}

// An index that packs its vectors ranks as it did whole: the same results
// with the same scores, for queries of a few words (scanned by their
// nonzero codes) and of many (scanned whole), and the same near duplicates
// of a memory; it holds less. A vector written into a packed block (a
// memory's, re-embedded) unpacks that block and leaves its other rows as
// they were.
func TestPackedVectorsRankTheSame(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	e.npc(t, "a", t0)
	e.say(t, "a", t0, lines(rng, 3000), nil)
	for i := range 2 * blockRows {
		m := &Memory{Content: fmt.Sprintf("Alice owes Brom %d gold for the sword%d she lost at the forge%d", i, rng.IntN(50), rng.IntN(50)), Importance: 5}
		if _, err := e.jour.AddMemory(ctx, "a", m); err != nil {
			t.Fatal(err)
		}
	}
	r := e.retriever(t, WithCacheBytes(1<<30))
	if err := r.Index(ctx, "a"); err != nil { // every item gets its vector
		t.Fatal(err)
	}
	var long string
	for i := range 60 {
		long += fmt.Sprintf("sword%d forge%d alice%d gold%d ", i, i+1, i+2, i+3)
	}
	queries := []string{"sword3", "alice7 forge2 gold9", long}
	var sparse []bool
	type dup struct {
		id  int64
		sim float64
	}
	search := func() ([][]Result, []dup) {
		sparse = sparse[:0]
		var all [][]Result
		for _, q := range queries {
			res, err := r.Search(ctx, "a", q, 10)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, res)
			x, err := r.acquire(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			sparse = append(sparse, x.sparse)
			r.release(x)
		}
		ms, err := r.NearDuplicates(ctx, "a", "Alice owes Brom gold for a sword7 at the forge3", 0.2, 20)
		if err != nil {
			t.Fatal(err)
		}
		var dups []dup
		for _, m := range ms {
			dups = append(dups, dup{m.Memory.ID, m.Similarity})
		}
		return all, dups
	}
	whole, wholeDups := search()
	if !slices.Contains(sparse, true) || !slices.Contains(sparse, false) || len(wholeDups) < 3 {
		t.Fatalf("the test needs queries scanned both ways (sparse: %v) and near duplicates (%d)", sparse, len(wholeDups))
	}
	x, err := r.acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	size, vecs := x.bytes(), x.vecs.bytes()
	freed := x.packVectors()
	packed, memsPacked := 0, 0
	for b, pk := range x.vecs.packed {
		if pk != nil {
			packed++
		}
		for _, p := range x.mems {
			if pk != nil && int(p)/blockRows == b {
				memsPacked++
			}
		}
	}
	if full := len(x.items) / blockRows; packed < full-1 || freed < vecs/3 || x.bytes() != size-freed+int64(cap(x.vecs.packed))*8 || memsPacked < blockRows {
		r.release(x)
		t.Fatalf("%d of %d full blocks packed (%d memories), freeing %d of the vectors' %d bytes; the index holds %d of %d", packed, full, memsPacked, freed, vecs, x.bytes(), size)
	}
	r.release(x)
	got, gotDups := search()
	for i := range whole {
		if len(got[i]) == 0 || len(got[i]) != len(whole[i]) {
			t.Fatalf("search %d: %d results packed, %d whole", i, len(got[i]), len(whole[i]))
		}
		for j := range whole[i] {
			if g, w := got[i][j], whole[i][j]; g.ID != w.ID || g.Kind != w.Kind || g.Score != w.Score {
				t.Fatalf("search %d, result %d: %s %d scores %v packed, %s %d %v whole", i, j, g.Kind, g.ID, g.Score, w.Kind, w.ID, w.Score)
			}
		}
	}
	if !slices.Equal(gotDups, wholeDups) {
		t.Fatalf("near duplicates packed %v, whole %v", gotDups, wholeDups)
	}
	// A vector written into a packed block.
	x, err = r.acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	p := int32(blockRows + 5)
	if x.vecs.packedAt(int(p)) == nil {
		t.Fatalf("the test needs item %d packed", p)
	}
	before := make([][]int8, 3*blockRows)
	for i := range before {
		before[i] = readRow(&x.vecs, i, make([]int8, x.dims))
	}
	v := make([]float32, x.dims)
	v[3], v[200] = 0.6, -0.8
	if err := x.setVec(p, v); err != nil {
		t.Fatal(err)
	}
	if x.vecs.packedAt(int(p)) != nil {
		t.Fatal("a vector written into a packed block left it packed")
	}
	for i, want := range before {
		got := readRow(&x.vecs, i, make([]int8, x.dims))
		if i == int(p) {
			if got[3] <= 0 || got[200] >= 0 || got[0] != 0 {
				t.Fatalf("item %d holds %v after its vector was written", p, got)
			}
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("item %d changed when item %d's vector was written", i, p)
		}
	}
	// Vectors released from packed blocks: the memories keep theirs. They
	// are released from all but the newest minVectorRows items, so the
	// NPC perceives that many more lines first.
	r.release(x)
	e.say(t, "a", t0, lines(rng, minVectorRows+blockRows), nil)
	// Packing stops at the first block with an item waiting for its
	// vector, and takes it up once none waits; it packs again the block
	// the vector written above unpacked.
	if x, err = r.acquire(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	first := len(x.items)
	for p := range x.pending {
		first = min(first, int(p))
	}
	x.packVectors()
	for b := range len(x.items) / blockRows {
		if packed := x.vecs.packedAt(b*blockRows) != nil; packed != (b < first/blockRows) {
			r.release(x)
			t.Fatalf("block %d packed: %v, with the first item waiting at %d", b, packed, first)
		}
	}
	r.release(x)
	if err := r.Index(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if x, err = r.acquire(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	defer r.release(x)
	x.packVectors()
	for b := range len(x.items) / blockRows {
		if x.vecs.packedAt(b*blockRows) == nil {
			t.Fatalf("block %d of %d not packed once no item waits", b, len(x.items)/blockRows)
		}
	}
	mems := map[int32][]int8{}
	for _, p := range x.mems {
		mems[p] = readRow(&x.vecs, int(p), make([]int8, x.dims))
	}
	want := (len(x.items) - minVectorRows) / blockRows * blockRows
	if !x.trimVectors(x.bytes(), 1) || x.vecFrom != want || x.vecFrom <= int(slices.Max(x.mems)) {
		t.Fatalf("vectors released up to item %d of %d, want %d (the newest %d kept); the memories reach %d", x.vecFrom, len(x.items), want, minVectorRows, slices.Max(x.mems))
	}
	for p, want := range mems {
		if got := x.vecRow(int(p)); !slices.Equal(got, want) {
			t.Fatalf("memory item %d keeps %v, held %v", p, got, want)
		}
	}
}

// A cache that outgrows its budget has its indexes pack their vectors
// before it drops any: NPCs whose indexes fit the budget only packed are
// searched in turn, round after round, without an index built again, and
// they rank as a cache with room for them whole does.
func TestIndexCachePacksVectorsBeforeDroppingIndexes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		e.npc(t, id, t0)
		e.say(t, id, t0, lines(rng, 1500), nil)
	}
	roomy := e.retriever(t, WithCacheBytes(1<<30))
	searchAll := func(r *Retriever) [][]Result {
		var all [][]Result
		for _, id := range ids {
			res, err := r.Search(ctx, id, "sword3 alice7 gold9", 8)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, res)
		}
		return all
	}
	for _, id := range ids {
		if err := roomy.Index(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	want := searchAll(roomy)
	whole := roomy.CacheStats().Bytes
	for _, id := range ids {
		x, err := roomy.acquire(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		x.packVectors()
		roomy.release(x)
	}
	packed := roomy.CacheStats().Bytes
	if roomy.packing.Load() || packed >= whole-whole/8 {
		t.Fatalf("packed, the indexes hold %d bytes, %d whole", packed, whole)
	}
	budget := packed + packed/10
	if budget >= whole {
		t.Fatalf("the test needs a budget (%d) under what the indexes hold whole (%d)", budget, whole)
	}
	r := e.retriever(t, WithCacheBytes(budget))
	for _, id := range ids {
		if err := r.Index(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		got := searchAll(r)
		for i := range want {
			if len(got[i]) == 0 || len(got[i]) != len(want[i]) {
				t.Fatalf("round %d, NPC %s: %d results, %d with room", round, ids[i], len(got[i]), len(want[i]))
			}
			for j := range want[i] {
				if g, w := got[i][j], want[i][j]; g.ID != w.ID || g.Score != w.Score {
					t.Fatalf("round %d, NPC %s, result %d: %d scores %v, with room %d %v", round, ids[i], j, g.ID, g.Score, w.ID, w.Score)
				}
			}
		}
	}
	// Every index packed its full blocks, the one in use when the cache
	// first outgrew its budget among them.
	for _, id := range ids {
		x, err := r.acquire(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		full := 0
		for b := range len(x.items) / blockRows {
			if x.vecs.packedAt(b*blockRows) != nil {
				full++
			}
		}
		n := len(x.items) / blockRows
		r.release(x)
		if full != n {
			t.Fatalf("NPC %s: %d of its %d full blocks packed", id, full, n)
		}
	}
	st := r.CacheStats()
	if !r.packing.Load() || st.Builds != int64(len(ids)) || st.Evictions != 0 || st.Entries != len(ids) || st.Bytes > st.Limit {
		t.Fatalf("a cache with room for the indexes packed: %+v (packing %v)", st, r.packing.Load())
	}
}

// An index that alone outgrows the cache's budget as its NPC lives packs
// its vectors before it releases any: one that fits the budget packed
// keeps the vectors of all its rows, and packs those of its new rows from
// then on.
func TestAnIndexOverTheBudgetPacksBeforeReleasingVectors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	e.npc(t, "a", t0)
	first, second := lines(rng, 3000), lines(rng, 3000)
	e.say(t, "a", t0, first, nil)
	e.say(t, "a", t0, second, nil)
	// What the index of all 6,000 lines holds, whole and packed.
	roomy := e.retriever(t, WithCacheBytes(1<<30))
	if err := roomy.Index(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	x, err := roomy.acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	whole := x.bytes()
	x.packVectors()
	packed := x.bytes()
	roomy.release(x)
	budget := (whole + packed) / 2
	if packed >= budget-budget/8 {
		t.Fatalf("the test needs an index that packs well: %d bytes whole, %d packed", whole, packed)
	}

	// The NPC's life so far fits the budget whole; it grows past it.
	e2 := newEnv(t)
	e2.npc(t, "a", t0)
	e2.say(t, "a", t0, first, nil)
	r := e2.retriever(t, WithCacheBytes(budget))
	if err := r.Index(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if r.packing.Load() {
		t.Fatal("an index within its budget packed")
	}
	for i := 0; i < len(second); i += 500 {
		e2.say(t, "a", t0, second[i:i+500], nil)
		if err := r.Index(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	x, err = r.acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer r.release(x)
	full, n := 0, len(x.items)/blockRows
	for b := range n {
		if x.vecs.packedAt(b*blockRows) != nil {
			full++
		}
	}
	if !r.packing.Load() || x.vecFrom != 0 || full != n || len(x.items) != 6000 {
		t.Fatalf("an index of %d items over its budget of %d: vectors released below %d, %d of %d full blocks packed (packing %v)",
			len(x.items), budget, x.vecFrom, full, n, r.packing.Load())
	}
}
