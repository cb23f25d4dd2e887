package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestSearchReadsShownMessagesOnce checks that a search showing the
// messages an earlier search showed reads none of them again, and shows
// them alike; and that a deleted NPC's cached rows go with its index.
func TestSearchReadsShownMessagesOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	e.say(t, "brom", t0, []string{"alice says: my sword is lost", "bob says: the forge is cold", "alice says: the sword has a red hilt"}, nil)
	r := e.retriever(t)
	r.cfg.keepBytes = 0 // the refresh keeps nothing: the first search reads what it shows
	var reads atomic.Int64
	e.jour.onLoad = func(k itemKind) {
		if k == kindMessage {
			reads.Add(1)
		}
	}
	defer func() { e.jour.onLoad = nil }()
	first, err := r.Search(ctx, "brom", "sword", 5)
	if err != nil || len(first) == 0 {
		t.Fatalf("first search: %v, %v", first, err)
	}
	if reads.Load() == 0 {
		t.Fatal("the first search read no message rows; the test counts the wrong statement")
	}
	reads.Store(0)
	again, err := r.Search(ctx, "brom", "sword", 5)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the second search read message rows %d times, want none", n)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("the second search shows otherwise (-first +second):\n%s", diff)
	}
	r.Forget("brom")
	reads.Store(0)
	if _, err := r.Search(ctx, "brom", "sword", 5); err != nil {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Error("after Forget a search read no message rows: the cache outlived the index")
	}
}

// TestSearchShowsNewMessagesWithoutReadingThem checks that messages added
// since an NPC's index was built, as a tick adds them, are shown by the
// next search without reading their rows again (the refresh that indexed
// them kept them), and exactly as a search of a fresh index shows them.
func TestSearchShowsNewMessagesWithoutReadingThem(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	e.say(t, "brom", t0, []string{"bob says: the forge is cold"}, nil)
	r := e.retriever(t)
	if _, err := r.Search(ctx, "brom", "forge", 5); err != nil {
		t.Fatal(err)
	}
	e.say(t, "brom", t0, []string{"alice says: my sword is lost", "alice says: the sword has a red hilt"}, []string{"ev-1", "ev-2"})
	var reads atomic.Int64
	e.jour.onLoad = func(k itemKind) {
		if k == kindMessage {
			reads.Add(1)
		}
	}
	defer func() { e.jour.onLoad = nil }()
	got, err := r.Search(ctx, "brom", "sword", 5)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the search read message rows %d times, want none: the refresh had them", n)
	}
	if len(got) == 0 || len(got[0].Sources.EventRefs) == 0 {
		t.Fatalf("search = %+v, want the new messages with their event refs", got)
	}
	cold, err := e.retriever(t).Search(ctx, "brom", "sword", 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cold, got); diff != "" {
		t.Errorf("the kept rows show otherwise than rows read (-read +kept):\n%s", diff)
	}
}

// TestSearchKeepsJournalEntries checks that journal entries a search
// showed, and those written since the index was built, are shown by the
// next search without reading them again, exactly as a fresh index shows
// them.
func TestSearchKeepsJournalEntries(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	add := func(content string) {
		t.Helper()
		en := &Entry{Type: TypeNote, Content: content, Importance: 7, GameTime: t0}
		en.Sources.V.EventRefs = []string{"ev-" + content[:4]}
		if err := e.jour.Add(ctx, "brom", en); err != nil {
			t.Fatal(err)
		}
	}
	add("Alice lost her sword at the forge.")
	r := e.retriever(t)
	if _, err := r.Search(ctx, "brom", "sword", 5); err != nil {
		t.Fatal(err)
	}
	add("Bob found a sword with a red hilt.")
	var reads atomic.Int64
	e.jour.onLoad = func(k itemKind) {
		if k == kindJournal {
			reads.Add(1)
		}
	}
	defer func() { e.jour.onLoad = nil }()
	got, err := r.Search(ctx, "brom", "sword", 5)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the search read journal entries %d times, want none", n)
	}
	if len(got) != 2 || got[0].Kind != KindJournal || len(got[0].Sources.EventRefs) == 0 {
		t.Fatalf("search = %+v, want both entries with their sources", got)
	}
	fresh := e.retriever(t)
	fresh.cfg.keepBytes = 0 // so that it reads the entries
	cold, err := fresh.Search(ctx, "brom", "sword", 5)
	if err != nil {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Error("a fresh index read no journal entries: the test counts the wrong statement")
	}
	if diff := cmp.Diff(cold, got); diff != "" {
		t.Errorf("kept entries show otherwise than entries read (-read +kept):\n%s", diff)
	}
}

// TestKeptResultsEqualReadOnes checks that searches answered from kept
// results (kept by the refresh that indexed the rows, or by an earlier
// search) return exactly what searches that read every row return: over
// messages with and without stamps and event refs, journal entries and
// memories, before and after new rows arrive.
func TestKeptResultsEqualReadOnes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	write := func(round int) {
		t.Helper()
		var texts, refs []string
		for i := 0; i < 12; i++ {
			texts = append(texts, fmt.Sprintf("[2026-11-21 10:%02d] alice says: round %d, the sword %d is at the forge with the red hilt", i, round, i))
			refs = append(refs, fmt.Sprintf("ev-%d-%d", round, i))
		}
		texts = append(texts, fmt.Sprintf("bob says: round %d, I lost my sword\n[2026-11-21 11:00] and the forge is cold", round))
		e.say(t, "brom", t0, texts, refs[:len(refs)-3])
		en := &Entry{Type: TypeNote, Content: fmt.Sprintf("Round %d: Alice looked for her sword at the forge.", round), Importance: 6, GameTime: t0}
		en.Sources.V.EventRefs = []string{fmt.Sprintf("ev-%d-0", round)}
		en.Sources.V.MessageIDs = []int64{1}
		if err := e.jour.Add(ctx, "brom", en); err != nil {
			t.Fatal(err)
		}
		m := &Memory{Content: fmt.Sprintf("Alice's sword %d has a red hilt.", round), Entity: "alice", Importance: 7, GameTime: t0}
		if _, err := e.jour.AddMemory(ctx, "brom", m); err != nil {
			t.Fatal(err)
		}
	}
	queries := []string{"sword", "red hilt forge", "alice round", "cold forge", "bob lost"}
	search := func(r *Retriever, q string) []Result {
		t.Helper()
		got, err := r.Search(ctx, "brom", q, 8)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("%q found nothing", q)
		}
		return got
	}
	write(0)
	kept := e.retriever(t)
	for round := 1; round <= 3; round++ {
		for _, q := range queries {
			cold := e.retriever(t)
			cold.cfg.keepBytes = 0
			want := search(cold, q)
			if cold.npcs["brom"].rows.size() == 0 {
				t.Fatal("a search kept no results")
			}
			for i := 0; i < 2; i++ {
				if diff := cmp.Diff(want, search(kept, q)); diff != "" {
					t.Fatalf("round %d, %q, search %d: kept results differ from read ones (-read +kept):\n%s", round, q, i, diff)
				}
			}
		}
		write(round)
	}
}

// TestRowCacheStaysWithinItsBounds checks that the results an index keeps
// stay within their bound, the least recently used dropped first, and that
// a refresh keeps the results of its newest rows only, within keepNewBytes.
func TestRowCacheStaysWithinItsBounds(t *testing.T) {
	for _, c := range []struct {
		cache int64
		want  int64
	}{{0, minRowBytes}, {1 << 20, minRowBytes}, {DefaultCacheBytes, DefaultCacheBytes / 64}, {1 << 40, maxRowBytes}} {
		if got := rowLimit(c.cache); got != c.want {
			t.Errorf("rowLimit(%d) = %d, want %d", c.cache, got, c.want)
		}
	}
	var big rowCache
	big.limit = 1 << 20
	for id := int64(1); id <= 4000; id++ {
		big.put(messageResult(id, "x", strings.Repeat("y", 600), nil, t0))
		if big.size() > big.limit {
			t.Fatalf("after %d results a cache bound to %d bytes holds %d", id, big.limit, big.size())
		}
	}
	if big.size() <= minRowBytes {
		t.Errorf("a cache bound to %d bytes holds %d, no more than the smallest bound", big.limit, big.size())
	}
	var c rowCache
	text := strings.Repeat("the sword has a red hilt ", 20)
	shrunk := false
	for id := int64(1); id <= 2000; id++ {
		res := messageResult(id, text, text, []string{"ev"}, t0)
		c.put(res)
		if keys := c.appendDedupKeys(nil, itemKey{kindMessage, id}, &res); !slices.Equal(keys, appendDedupKeys(nil, &res)) {
			t.Fatalf("kept keys %v, want %v", keys, appendDedupKeys(nil, &res))
		}
		if id == 200 {
			c.get(itemKey{kindMessage, 1}) // used again: kept longer than 2 to 200
		}
		if two := c.has(itemKey{kindMessage, 2}); id > 2 && !two && !shrunk {
			// The first results dropped are the least recently used: 2
			// went, 1, used at 200, stays.
			shrunk = true
			if one := c.has(itemKey{kindMessage, 1}); !one {
				t.Fatalf("after %d results the cache dropped 1, used last at 200, with 2", id)
			}
		}
		if c.size() > minRowBytes {
			t.Fatalf("after %d results the cache holds %d bytes, over %d", id, c.size(), minRowBytes)
		}
	}
	if _, ok := c.get(itemKey{kindMessage, 2000}); !ok {
		t.Error("the newest result was dropped")
	}
	if _, ok := c.get(itemKey{kindMessage, 2}); ok {
		t.Error("the oldest result was kept")
	}
	if !shrunk {
		t.Error("2,000 results never made the cache drop one")
	}
	var sum int64
	for _, i := range c.at {
		sum += c.slot(i).size
	}
	if sum != c.bytes || c.size() != sum+int64(len(c.free))*slotBytes {
		t.Errorf("the cache counts %d bytes (%d with its %d empty slots), its results hold %d", c.bytes, c.size(), len(c.free), sum)
	}

	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	var texts []string
	for i := 0; i < 600; i++ {
		texts = append(texts, fmt.Sprintf("alice says: line %d, %s", i, text))
	}
	ids := e.say(t, "brom", t0, texts, nil)
	r := e.retriever(t)
	x, err := r.acquire(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	defer r.release(x)
	if n := x.rows.bytes; n == 0 || n > keepNewBytes {
		t.Errorf("a refresh of %d rows kept %d bytes of results, want some within %d", len(ids), n, keepNewBytes)
	}
	if empty := x.rows.size() - x.rows.bytes; empty > int64(lastChunk)*slotBytes {
		t.Errorf("a refresh left %d bytes of empty slots, more than a chunk's", empty)
	}
	if _, ok := x.rows.get(itemKey{kindMessage, ids[len(ids)-1]}); !ok {
		t.Error("the refresh did not keep the newest message")
	}
	if _, ok := x.rows.get(itemKey{kindMessage, ids[0]}); ok {
		t.Error("the refresh kept the oldest message, past its bound")
	}
}

// TestKeepNewestKeepsTheNewestAsUsedInIDOrder checks that keepNewest keeps
// the newest rows that fit its bound, none after a row whose result cannot
// be made, each as used in id order: the older are dropped first.
func TestKeepNewestKeepsTheNewestAsUsedInIDOrder(t *testing.T) {
	var c rowCache
	c.put(messageResult(1000, "x", "kept before", nil, t0))
	text := strings.Repeat("y", 100)
	each := resultBytes(new(messageResult(1, text, text, nil, t0)))
	made := 0
	c.keepNewest(20, 5*each, func(i int) (Result, error) {
		made++
		return messageResult(int64(i+1), text, text, nil, t0), nil
	})
	if made != 6 {
		t.Errorf("keepNewest made %d results for a bound of 5, want 6 (the one past the bound tells)", made)
	}
	for id := int64(1); id <= 20; id++ {
		kept := c.has(itemKey{kindMessage, id})
		if want := id > 15; kept != want {
			t.Errorf("message %d kept: %v, want %v", id, kept, want)
		}
	}
	c.get(itemKey{kindMessage, 16}) // used again: now the last used
	c.shrink(3*each + emptySlots(3)*slotBytes)
	for id, want := range map[int64]bool{1000: false, 16: true, 17: false, 18: false, 19: true, 20: true} {
		if kept := c.has(itemKey{kindMessage, id}); kept != want {
			t.Errorf("after shrinking, message %d kept: %v, want %v (dropped: the least recently used first, the older of the kept first)", id, kept, want)
		}
	}
	var bad rowCache
	bad.keepNewest(10, 1<<20, func(i int) (Result, error) {
		if i == 6 {
			return Result{}, errors.New("bad refs")
		}
		return messageResult(int64(i+1), text, text, nil, t0), nil
	})
	for id := int64(1); id <= 10; id++ {
		if kept := bad.has(itemKey{kindMessage, id}); kept != (id > 7) {
			t.Errorf("with row 7 unreadable, message %d kept: %v, want %v", id, kept, id > 7)
		}
	}
}

// has reports whether c keeps the result of item k.
func (c *rowCache) has(k itemKey) bool {
	_, ok := c.at[k]
	return ok
}

// TestRowCacheReusesAndPacksItsSlots checks the slots the kept results sit
// in: a shrink moves the results left to the lowest slots and drops the
// chunks left empty, the empty slots are taken before a chunk is added,
// and every result, and the dedup keys a search asked of it, stay what
// was put.
func TestRowCacheReusesAndPacksItsSlots(t *testing.T) {
	var c rowCache
	c.limit = 1 << 30
	result := func(id int64) Result {
		text := fmt.Sprintf("line %d about the red hilt", id)
		return messageResult(id, text, text, []string{fmt.Sprint("ev", id)}, t0)
	}
	sum := func(ids []int64) (n int64) {
		for _, id := range ids {
			n += resultBytes(new(result(id)))
		}
		return n
	}
	check := func(when string, ids []int64, chunks int) {
		t.Helper()
		if len(c.at) != len(ids) || len(c.chunks) != chunks {
			t.Fatalf("%s: %d results kept in %d chunks, want %d in %d", when, len(c.at), len(c.chunks), len(ids), chunks)
		}
		if slots := chunkStart(len(c.chunks)); slots != len(c.at)+len(c.free) {
			t.Fatalf("%s: %d slots, %d of them kept and %d empty", when, slots, len(c.at), len(c.free))
		}
		if c.bytes != sum(ids) || c.size() != c.bytes+int64(len(c.free))*slotBytes {
			t.Fatalf("%s: the cache counts %d bytes (%d with its empty slots), its results hold %d", when, c.bytes, c.size(), sum(ids))
		}
		for _, id := range ids {
			k := itemKey{kindMessage, id}
			want := result(id)
			got, ok := c.get(k)
			if !ok || got.Content != want.Content || !slices.Equal(got.Sources.EventRefs, want.Sources.EventRefs) {
				t.Fatalf("%s: message %d kept as %+v (%v), want %+v", when, id, got, ok, want)
			}
			if keys := c.appendDedupKeys(nil, k, &got); !slices.Equal(keys, appendDedupKeys(nil, &want)) {
				t.Fatalf("%s: message %d has keys %v, want %v", when, id, keys, appendDedupKeys(nil, &want))
			}
		}
	}
	chunks := chunksFor
	var ids []int64
	for id := int64(1); id <= 320; id++ {
		c.put(result(id))
		ids = append(ids, id)
	}
	check("after 320 puts", ids, chunks(320))
	// Dropping the 100 least recently used packs the rest into the fewest
	// chunks; the next 100 results take the empty slots first.
	ids = ids[100:]
	c.shrink(sum(ids) + emptySlots(len(ids))*slotBytes)
	check("after dropping 100", ids, chunks(220))
	for id := int64(321); id <= 420; id++ {
		c.put(result(id))
		ids = append(ids, id)
	}
	check("after 100 more puts", ids, chunks(320))
	// A shrink to 50 results keeps the 50 used last, and the slots of the
	// chunks they fill count.
	ids = ids[len(ids)-50:]
	c.shrink(sum(ids) + emptySlots(50)*slotBytes)
	check("after a shrink to 50", ids, chunks(50))
	c.shrink(0)
	check("after a shrink to nothing", nil, 0)
	if c.size() != 0 {
		t.Fatalf("an empty cache counts %d bytes", c.size())
	}
}

// TestUnionKeepsOrderAndDropsRepeats checks union on the short lists it
// scans and the long ones it hashes alike: a's elements first as they are,
// then b's missing from a, once each, in order.
func TestUnionKeepsOrderAndDropsRepeats(t *testing.T) {
	for _, n := range []int{0, 3, 8, 40} {
		var a, b, want []int64
		for i := 0; i < n; i++ {
			a = append(a, int64(2*i))
		}
		want = append(want, a...)
		for i := 0; i < n; i++ {
			b = append(b, int64(3*i), int64(3*i))
			if (3*i)%2 != 0 || 3*i >= 2*n {
				want = append(want, int64(3*i))
			}
		}
		if got := union(append([]int64{}, a...), b); !cmp.Equal(got, want, cmpopts.EquateEmpty()) {
			t.Errorf("n=%d: union = %v, want %v", n, got, want)
		}
	}
	if got := union([]string{}, nil); got == nil {
		t.Error("union of an empty list and nothing is nil, want empty")
	}
}

// distinct returns a list without repeats itself, capped so that appending
// to it copies it, and a list with repeats (short or long) as a new list
// without them; never nil.
func TestDistinctSharesOnlyListsWithoutRepeats(t *testing.T) {
	if got := distinct[int64](nil); got == nil || len(got) != 0 {
		t.Errorf("distinct(nil) = %#v, want an empty list", got)
	}
	for _, n := range []int{1, 5, 16, 17, 40} {
		xs := make([]int64, n, n+8)
		for i := range xs {
			xs[i] = int64(i * 7)
		}
		got := distinct(xs)
		if &got[0] != &xs[0] || len(got) != n || cap(got) != n {
			t.Errorf("n=%d: a list without repeats is not returned itself, capped (len %d cap %d)", n, len(got), cap(got))
		}
		_ = append(got, -1)
		if xs[:n+1][n] == -1 {
			t.Errorf("n=%d: appending to what distinct returned wrote into the list given", n)
		}
		rep := append(append([]int64{}, xs...), xs[n/2])
		got = distinct(rep)
		if !cmp.Equal(got, xs) {
			t.Errorf("n=%d: distinct of a list with a repeat = %v, want %v", n, got, xs)
		}
		if &got[0] == &rep[0] {
			t.Errorf("n=%d: a list with repeats is returned itself", n)
		}
	}
}
