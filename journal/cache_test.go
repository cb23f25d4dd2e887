package journal

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// The index cache reports its size and keeps within its budget: the least
// recently searched NPCs are dropped first, the one being searched is kept.
func TestIndexCacheStaysWithinItsBudget(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var texts []string
	for i := 0; i < 60; i++ {
		texts = append(texts, fmt.Sprintf("Alice owes Brom %d gold for the sword number %d she lost at the forge.", i, i))
	}
	ids := []string{"a", "b", "c", "d", "e", "f"}
	for _, id := range ids {
		e.npc(t, id, t0)
		e.say(t, id, t0, texts, nil)
	}
	// One NPC's index, measured with a budget large enough for all.
	big := e.retriever(t)
	if st := big.CacheStats(); st.Entries != 0 || st.Bytes != 0 || st.Limit != DefaultCacheBytes {
		t.Fatalf("an unused cache: %+v", st)
	}
	for _, id := range ids {
		if _, err := big.Search(ctx, id, "sword", 3); err != nil {
			t.Fatal(err)
		}
	}
	all := big.CacheStats()
	if all.Entries != len(ids) || all.Bytes <= 0 {
		t.Fatalf("after searching %d NPCs: %+v", len(ids), all)
	}
	// An index with the results its searches keep, and without them: a
	// cache over its budget drops those of the others (not those of the
	// index searched) before it drops an index.
	full, one := all.Bytes/int64(len(ids)), indexBytes(big)/int64(len(ids))
	if full <= one {
		t.Fatalf("an index of %d bytes keeps no results (%d without them)", full, one)
	}
	// A budget of about two indexes holds two, whatever the number searched.
	r := e.retriever(t, WithCacheBytes(full+one+one/2))
	var evicted int64
	for _, id := range ids {
		if _, err := r.Search(ctx, id, "sword", 3); err != nil {
			t.Fatal(err)
		}
		st := r.CacheStats()
		if st.Bytes > st.Limit || st.Entries > 2 {
			t.Fatalf("after searching %s: %+v, over the budget", id, st)
		}
		// A search that found the cache over its budget brought it down
		// to 15/16 of it, not just under it.
		if st.Evictions > evicted && st.Bytes > st.Limit-st.Limit/16 {
			t.Fatalf("after searching %s, which dropped an index: %+v, above 15/16 of the budget", id, st)
		}
		evicted = st.Evictions
	}
	if st := r.CacheStats(); st.Entries != 2 {
		t.Fatalf("the cache holds %d indexes, want the last 2 searched: %+v", st.Entries, st)
	}
	// A budget that two indexes fill past 15/16: a search that finds the
	// cache over it brings it down to 15/16, that is to one index.
	tight := e.retriever(t, WithCacheBytes(full+one+one/32))
	evicted = 0
	for _, id := range ids {
		if _, err := tight.Search(ctx, id, "sword", 3); err != nil {
			t.Fatal(err)
		}
		st := tight.CacheStats()
		if st.Evictions > evicted && st.Bytes > st.Limit-st.Limit/16 {
			t.Fatalf("after searching %s, which dropped an index: %+v, above 15/16 of the budget", id, st)
		}
		evicted = st.Evictions
	}
	if evicted == 0 {
		t.Fatal("no index dropped under a budget of two: the test needs some")
	}
}

// indexBytes is what r's indexes hold without the results they keep (see
// rowCache).
func indexBytes(r *Retriever) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, y := range r.npcs {
		n += y.sizeHint - y.rows.size()
	}
	return n
}

// Over its budget, the cache first cuts the results other indexes keep to
// the smallest bound, then to a few ticks' worth, then drops them, and
// drops an index only when that is not enough or the index is in use.
func TestIndexCacheCutsKeptResultsBeforeDroppingIndexes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "a", t0)
	e.npc(t, "b", t0)
	r := e.retriever(t, WithCacheBytes(64<<20))
	for _, id := range []string{"a", "b"} {
		if _, err := r.Search(ctx, id, "sword", 3); err != nil {
			t.Fatal(err)
		}
	}
	fill := func(id string) {
		t.Helper()
		x, err := r.acquire(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(1); i <= 2000; i++ {
			x.rows.put(messageResult(i, "x", strings.Repeat("y", 600), nil, t0))
		}
		if x.rows.size() <= minRowBytes {
			t.Fatalf("%s keeps %d bytes of results, want more than %d", id, x.rows.size(), minRowBytes)
		}
		r.release(x)
	}
	consistent := func() {
		t.Helper()
		r.mu.Lock()
		defer r.mu.Unlock()
		var sum int64
		for _, y := range r.npcs {
			sum += y.sizeHint
		}
		if sum != r.cached {
			t.Fatalf("the cache counts %d bytes, its indexes %d", r.cached, sum)
		}
	}
	fill("a")
	fill("b")
	consistent()
	a, b := r.npcs["a"], r.npcs["b"]
	// searchB searches b under the budget set, which cutting a's results
	// (how far: enough) must meet without dropping an index.
	searchB := func(enough string) {
		t.Helper()
		x, err := r.acquire(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		r.release(x)
		consistent()
		if r.npcs["a"] != a || r.npcs["b"] != b {
			t.Fatalf("an index was dropped while %s was enough: %v", enough, r.npcs)
		}
	}
	// A budget that holds b whole and a with its results cut.
	r.cfg.cacheBytes = r.cached - a.rows.size() + minRowBytes
	searchB("cutting results")
	if n := a.rows.size(); n > minRowBytes {
		t.Errorf("a keeps %d bytes of results, want them cut to %d", n, minRowBytes)
	}
	if n := b.rows.size(); n <= minRowBytes {
		t.Errorf("b, searched last, keeps %d bytes of results: cut", n)
	}
	if st := r.CacheStats(); st.Bytes > st.Limit {
		t.Errorf("the cache holds %d bytes, over its budget %d", st.Bytes, st.Limit)
	}
	// A budget that holds them only with a's results cut to a few
	// ticks' worth: they are cut that far, and no index is dropped.
	r.cfg.cacheBytes = r.cached - a.rows.size() + leanRowBytes
	searchB(fmt.Sprintf("cutting results to %d bytes", leanRowBytes))
	if n := a.rows.size(); n > leanRowBytes || n == 0 {
		t.Fatalf("a keeps %d bytes of results, want them cut to at most %d, not all dropped", n, leanRowBytes)
	}
	// A budget to whose 15/16 (what a release brings the cache down to)
	// cutting a's results to a few ticks' worth does not bring it, but
	// dropping them all does: they all go, and still no index is dropped.
	r.cfg.cacheBytes = 1 << 40
	fill("a")
	r.cfg.cacheBytes = (r.cached-a.rows.size()+leanRowBytes/2)*16/15 + 1
	if r.cached <= r.cfg.cacheBytes {
		t.Fatalf("a budget of %d for a cache of %d: the test needs it over", r.cfg.cacheBytes, r.cached)
	}
	bRows := b.rows.size()
	searchB("dropping the results another keeps")
	if n := a.rows.size(); n != 0 {
		t.Errorf("a keeps %d bytes of results, want none", n)
	}
	if n := b.rows.size(); n != bRows {
		t.Errorf("b, searched last, keeps %d bytes of results, had %d: cut", n, bRows)
	}
	// An index in use is not cut: it is dropped.
	r.cfg.cacheBytes = 1 << 40
	fill("a")
	fill("b")
	r.cfg.cacheBytes = r.cached - 1
	a.mu.Lock()
	b, err := r.acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	r.release(b)
	a.mu.Unlock()
	consistent()
	if _, ok := r.npcs["a"]; ok {
		t.Error("the index in use was kept although the budget needed its room")
	}
}

// The cache counts its builds, evictions and rebuilds (builds of an index
// evicted less than a minute before), and a cache too small for the NPCs
// searched in turn says so in one warning a minute, not one per rebuild.
func TestIndexCacheCountsRebuilds(t *testing.T) {
	e, ids, _ := fourNPCs(t)
	ctx := context.Background()
	searchAll := func(r *Retriever) {
		t.Helper()
		for _, id := range ids {
			if _, err := r.Search(ctx, id, "sword", 3); err != nil {
				t.Fatal(err)
			}
		}
	}
	var roomy bytes.Buffer
	big := e.retriever(t, WithLogger(zerolog.New(&roomy)))
	for round := 0; round < 3; round++ {
		searchAll(big)
	}
	one := big.CacheStats().Bytes / int64(len(ids))
	if st := big.CacheStats(); st.Builds != int64(len(ids)) || st.Evictions != 0 || st.Rebuilds != 0 {
		t.Fatalf("a cache that holds every index, after 3 rounds: %+v, want %d builds and nothing else", st, len(ids))
	}
	var tight bytes.Buffer
	small := e.retriever(t, WithCacheBytes(2*one+one/2), WithLogger(zerolog.New(&tight)))
	searchAll(small)
	first := small.CacheStats()
	if first.Builds != int64(len(ids)) || first.Evictions != int64(len(ids)-2) || first.Rebuilds != 0 {
		t.Fatalf("a cache of two indexes after one round: %+v, want %d builds, %d evictions, no rebuild", first, len(ids), len(ids)-2)
	}
	searchAll(small)
	searchAll(small)
	st := small.CacheStats()
	// Some searches find their index dropped since the round before:
	// every build after the first round is a rebuild, and every build
	// beyond the two indexes held dropped one.
	if st.Builds <= int64(len(ids)) || st.Rebuilds != st.Builds-int64(len(ids)) || st.Evictions != st.Builds-2 || st.Entries != 2 {
		t.Fatalf("a cache of two indexes after three rounds of %d NPCs: %+v", len(ids), st)
	}
	if n := strings.Count(tight.String(), "too small"); n != 1 {
		t.Fatalf("%d warnings of a cache too small, want 1 within a minute:\n%s", n, tight.String())
	}
	if !strings.Contains(tight.String(), `"rebuilds":1`) || strings.Contains(roomy.String(), "too small") {
		t.Fatalf("the warnings: %q (tight), %q (roomy)", tight.String(), roomy.String())
	}
	// A rebuild long after the eviction is a build like any other.
	small.mu.Lock()
	for id := range small.evicted {
		small.evicted[id] = small.evicted[id].Add(-thrashWindow)
	}
	small.mu.Unlock()
	searchAll(small)
	// The round's first build is of an index evicted a minute ago: a
	// build, not a rebuild.
	if st2 := small.CacheStats(); st2.Builds == st.Builds || st2.Rebuilds-st.Rebuilds > st2.Builds-st.Builds-1 {
		t.Fatalf("after the evictions aged a minute: %+v (before %+v)", st2, st)
	}
}

// Warm builds the indexes of the NPCs it is given, in order, with their
// vectors, so that their first searches build nothing; it skips the NPCs
// already cached or refused by hold, and stops once the cache holds
// WarmShare of its budget, dropping nothing.
func TestWarm(t *testing.T) {
	e, ids, texts := fourNPCs(t)
	ctx := context.Background()
	r := e.retriever(t)
	if _, err := r.Search(ctx, "b", "sword", 3); err != nil {
		t.Fatal(err)
	}
	var held, released []string
	hold := func(_ context.Context, id string) (func(), bool) {
		if id == "d" {
			return nil, false
		}
		held = append(held, id)
		return func() { released = append(released, id) }, true
	}
	n, err := r.Warm(ctx, []string{"c", "b", "a", "d"}, hold)
	if err != nil || n != 2 {
		t.Fatalf("Warm = %d, %v; want the 2 NPCs neither cached nor refused", n, err)
	}
	if fmt.Sprint(held) != "[c a]" || fmt.Sprint(released) != "[c a]" {
		t.Fatalf("held %v, released %v; want c then a, each released", held, released)
	}
	for _, id := range []string{"a", "c"} {
		x := r.npcs[id]
		if x == nil || len(x.pending) != 0 || len(x.semText) != 0 || len(x.items) != len(texts) {
			t.Fatalf("the warmed index of %s: %+v", id, x)
		}
	}
	if _, ok := r.npcs["d"]; ok {
		t.Fatal("d, refused by hold, was built")
	}
	one := r.npcs["c"].sizeHint // a warmed index, as the cache counts it
	before := r.CacheStats()
	for _, id := range []string{"a", "c"} {
		if _, err := r.Search(ctx, id, "sword", 3); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.CacheStats(); st.Builds != before.Builds {
		t.Fatalf("searches of warmed NPCs built %d indexes", st.Builds-before.Builds)
	}
	// A budget that one index fills past WarmShare: one is built, and
	// nothing is dropped.
	small := e.retriever(t, WithCacheBytes(one+one/4))
	if n, err := small.Warm(ctx, ids, nil); err != nil || n != 1 {
		t.Fatalf("Warm with room for one index = %d, %v", n, err)
	}
	if st := small.CacheStats(); st.Entries != 1 || st.Evictions != 0 {
		t.Fatalf("after warming into a small cache: %+v", st)
	}
	// An ended context builds nothing and is no error.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if n, err := e.retriever(t).Warm(done, ids, nil); err != nil || n != 0 {
		t.Fatalf("Warm with an ended context = %d, %v", n, err)
	}
}

// fourNPCs makes NPCs a, b, c and d, each with the same two perceived
// lines, and returns them with those lines.
func fourNPCs(t *testing.T) (e *testEnv, ids, texts []string) {
	t.Helper()
	e = newEnv(t)
	texts = []string{"Alice owes Brom 30 gold for the sword she lost at the forge.", "Tobin sold a rusty axe at the market."}
	ids = []string{"a", "b", "c", "d"}
	for _, id := range ids {
		e.npc(t, id, t0)
		e.say(t, id, t0, texts, nil)
	}
	return e, ids, texts
}

// Searches borrow their rank scratch and give it back: no NPC's index
// keeps one between searches, searches of many NPCs at once each work in
// a scratch of their own, and the scratch kept for the next searches is
// bounded.
func TestSearchesShareRankScratch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var ids []string
	for i := range 12 {
		id := fmt.Sprintf("npc%d", i)
		ids = append(ids, id)
		e.npc(t, id, t0)
		e.say(t, id, t0, []string{
			fmt.Sprintf("Alice owes %s %d gold for the sword.", id, i),
			"The north road is busy today.",
			fmt.Sprintf("%s keeps the key of the cellar under the anvil.", id),
		}, nil)
	}
	r := e.retriever(t)
	want := map[string]int64{}
	for _, id := range ids {
		res, err := r.Search(ctx, id, "gold sword", 1)
		if err != nil || len(res) != 1 {
			t.Fatalf("%s: %v, %d results", id, err, len(res))
		}
		want[id] = res[0].ID
	}
	// The same searches, all at once, find the same rows.
	var wg sync.WaitGroup
	for round := range 4 {
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := r.Search(ctx, id, "gold sword", 1)
				if err != nil || len(res) != 1 || res[0].ID != want[id] {
					t.Errorf("round %d, %s: %v, %+v, want row %d", round, id, err, res, want[id])
				}
			}()
		}
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, x := range r.npcs {
		if x.rs != nil {
			t.Errorf("%s's index keeps a rank scratch between searches", id)
		}
	}
	if n := r.scratch.Len(); n < 1 || n > maxFreeScratch {
		t.Fatalf("%d scratches kept, want 1 to %d", n, maxFreeScratch)
	}
}

// NPCs searched in turn, more than the cache holds, do not each build
// their index again at every search, as dropping the least recently
// searched would have them do: the same ones stay, and about the share
// that does not fit is built again each round.
func TestIndexCacheKeepsMostOfNPCsSearchedInTurn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const npcs = 12
	var ids []string
	for i := range npcs {
		id := fmt.Sprintf("npc%02d", i)
		ids = append(ids, id)
		e.npc(t, id, t0)
		var texts []string
		for j := range 40 {
			texts = append(texts, fmt.Sprintf("%s heard traveler %d tell of the road to Varn and the price of salt.", id, j))
		}
		e.say(t, id, t0, texts, nil)
	}
	measure := e.retriever(t)
	for _, id := range ids {
		if _, err := measure.Search(ctx, id, "salt", 3); err != nil {
			t.Fatal(err)
		}
	}
	one := indexBytes(measure) / npcs
	// Room for about nine of the twelve.
	r := e.retriever(t, WithCacheBytes(9*one))
	round := func() {
		for _, id := range ids {
			if _, err := r.Search(ctx, id, "salt", 3); err != nil {
				t.Fatal(err)
			}
		}
	}
	round()
	round()
	before := r.CacheStats().Builds
	const rounds = 5
	for range rounds {
		round()
	}
	built := r.CacheStats().Builds - before
	if st := r.CacheStats(); st.Bytes > st.Limit {
		t.Fatalf("over the budget: %+v", st)
	}
	// Dropping the least recently searched builds all twelve each round;
	// by rank, about the three that do not fit are.
	if want := rounds * npcs * 2 / 3; built > int64(want) {
		t.Errorf("%d indexes built in %d rounds of %d searches, want at most %d: the NPCs searched in turn each build theirs again", built, rounds, npcs, want)
	}
	if built == 0 {
		t.Errorf("no index built again in %d rounds: the budget holds every NPC, the test needs it to hold fewer", rounds)
	}
}

// The free list keeps at most maxFreeScratch scratches, none larger than
// maxScratchBytes: one grown by the search of a huge index is let go.
func TestScratchListIsBounded(t *testing.T) {
	var l scratchList
	big := l.get()
	big.reset(8 * maxScratchBytes) // a bitmap of 8 Mi positions: 2 MiB of words
	if big.bytes() <= maxScratchBytes {
		t.Fatalf("a scratch of %d bytes: the test needs one over %d", big.bytes(), maxScratchBytes)
	}
	l.put(big)
	if l.Len() != 0 {
		t.Fatal("a scratch over the bound was kept")
	}
	for range maxFreeScratch + 5 {
		l.put(&rankScratch{})
	}
	if l.Len() != maxFreeScratch {
		t.Fatalf("%d scratches kept, want %d", l.Len(), maxFreeScratch)
	}
	if rs := l.get(); rs == nil || l.Len() != maxFreeScratch-1 {
		t.Fatalf("get took %v, leaving %d", rs, l.Len())
	}
}

// What the cache counts of an index is what the index holds: the heap an
// index of 12,000 messages takes is within 8% of its count, so a budget
// bounds the memory it names. The lists of words are counted with
// the room they grew into, and the maps of items waiting for a vector,
// which keep the room of the most they held, are made anew once a build
// has drained them.
func TestIndexBytesCountItsHeap(t *testing.T) {
	e, _ := chattyNPC(t, 1, 12)
	ctx := context.Background()
	r := e.retriever(t, WithCacheBytes(1<<30))
	heap, counted := indexHeap(t, e, r, func() {
		if _, err := r.Search(ctx, "a", "sword forge alice", 5); err != nil {
			t.Fatal(err)
		}
	})
	if ratio := float64(counted) / float64(heap); ratio < 0.92 || ratio > 1.3 {
		t.Fatalf("the index of 12,000 messages takes %d bytes of heap, the cache counts %d (%.2f of it)", heap, counted, ratio)
	}
	// The maps of items waiting for a vector, which held all 12,000
	// during the build, were made anew once drained.
	x, err := r.acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	most, semMost := x.pendingMost, x.semTextMost
	r.release(x)
	if most != 0 || semMost != 0 {
		t.Fatalf("drained maps kept: they held up to %d and %d items waiting for a vector", most, semMost)
	}
}

// The many small indexes of a world of short-lived NPCs hold what the
// cache counts of them too: there a word costs more than its postings
// (its entry, its list, its family), and a result kept more than its text.
func TestSmallIndexesCountTheirHeap(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 3000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%x%c", i*7919, 'a'+rune(i%26))
	}
	const npcs = 100
	for n := range npcs {
		id := fmt.Sprintf("n%d", n)
		e.npc(t, id, t0)
		texts := make([]string, 240)
		for i := range texts {
			var b strings.Builder
			fmt.Fprintf(&b, "[2026-11-21 10:%02d] Traveler%d says: \"", i%60, rng.IntN(30))
			for range 10 + rng.IntN(15) {
				b.WriteString(vocab[int(rng.ExpFloat64()*300)%len(vocab)] + " ")
			}
			texts[i] = b.String() + "\""
		}
		e.say(t, id, t0, texts, nil)
	}
	r := e.retriever(t, WithCacheBytes(1<<30))
	heap, counted := indexHeap(t, e, r, func() {
		for n := range npcs {
			if _, err := r.Search(ctx, fmt.Sprintf("n%d", n), vocab[3]+" "+vocab[40], 5); err != nil {
				t.Fatal(err)
			}
		}
	})
	if ratio := float64(counted) / float64(heap); ratio < 0.85 || ratio > 1.3 {
		t.Fatalf("%d indexes of 240 messages take %d bytes of heap each, the cache counts %d (%.2f of it)", npcs, heap/npcs, counted/npcs, ratio)
	}
}

// indexHeap returns the heap that the indexes built by searches take, once
// collected, and what r's cache counts of them. What every index shares
// (the word vectors, the tokenizer) is loaded before, by a first search of
// another NPC.
func indexHeap(t *testing.T, e *testEnv, r *Retriever, searches func()) (heap, counted int64) {
	t.Helper()
	e.npc(t, "w", t0)
	e.say(t, "w", t0, []string{"Alice owes Brom gold for the sword.", "The wolves came down the north road."}, nil)
	if _, err := r.Search(context.Background(), "w", "sword forge alice", 5); err != nil {
		t.Fatal(err)
	}
	before := r.CacheStats().Bytes
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	searches()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	return int64(m1.HeapAlloc) - int64(m0.HeapAlloc), r.CacheStats().Bytes - before
}

// The rows a search shows and reads from the database are counted
// (CacheStats.RowReads); those its NPC's index keeps are not read, so not
// counted, until the cache cuts them.
func TestIndexCacheCountsTheRowsSearchesRead(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "a", t0)
	e.say(t, "a", t0, []string{
		"Alice owes Brom ten gold for the sword she lost at the forge.",
		"The wolves came down from the north road last night.",
		"Brom sharpened the sword and hung it above the forge.",
		"The baker sells bread at the mill by the river.",
	}, nil)
	r := e.retriever(t)
	cut := func() {
		t.Helper()
		x, err := r.acquire(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		x.rows.shrink(0)
		r.release(x)
	}
	search := func() []Result {
		t.Helper()
		res, err := r.Search(ctx, "a", "sword forge", 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) == 0 {
			t.Fatal("no result for a planted line")
		}
		return res
	}
	cut()
	before := r.CacheStats().RowReads
	res := search()
	read := r.CacheStats().RowReads - before
	if read < int64(len(res)) {
		t.Fatalf("a search that kept nothing showed %d rows and counts %d read", len(res), read)
	}
	// Shown again, the rows are kept: nothing more is read.
	search()
	if n := r.CacheStats().RowReads - before; n != read {
		t.Fatalf("a search of rows kept counts %d read, want the %d read before", n-read, read)
	}
	// Cut, they are read again.
	cut()
	search()
	if n := r.CacheStats().RowReads - before; n < 2*read {
		t.Fatalf("a search after the kept rows were cut counts %d read, want %d again", n-read, read)
	}
}
