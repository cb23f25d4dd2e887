package journal

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
)

// traders appends n perceived lines of traders to brom's history, the
// first numbered from, and returns them as stored.
func traders(t *testing.T, e *testEnv, from, n int) []*character.Message {
	t.Helper()
	msgs := make([]*character.Message, n)
	for i := range msgs {
		msgs[i] = &character.Message{Role: llm.RoleUser, Turn: int64(from + i + 1), GameTime: t0,
			Content: fmt.Sprintf("Trader%d says: the caravan from the east carries %d barrels of salt.", from+i, from+i)}
	}
	if err := e.chars.AppendMessages(context.Background(), "brom", msgs, llm.NewCounter(""), 0); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// within returns a budget that brom's index in r, of n items, outgrows,
// and comes within once it releases every vector it can: what it holds
// less half of those vectors.
func within(r *Retriever, n int) int64 {
	return r.CacheStats().Bytes - int64(n-minVectorRows)*int64(r.vectorDims())/2
}

// withinPacked is within for an index that packs its vectors before it
// releases any: a budget that brom's index in r, of n items, outgrows
// packed, and comes within once it releases every packed vector it can,
// but not within three quarters of it: what it holds packed less three
// quarters of those vectors.
func withinPacked(t *testing.T, r *Retriever, n int) int64 {
	t.Helper()
	x, err := r.acquire(context.Background(), "brom")
	if err != nil {
		t.Fatal(err)
	}
	x.packVectors()
	var releasable int64
	for b := range (n - minVectorRows) / blockRows {
		if pk := x.vecs.packedAt(b * blockRows); pk != nil {
			releasable += pk.bytes()
		} else {
			releasable += int64(blockRows * x.dims)
		}
	}
	r.release(x)
	return r.CacheStats().Bytes - releasable*3/4
}

// findsFirst checks that each retriever of rs, searching brom's rows for
// each query of want, finds the row want gives first.
func findsFirst(t *testing.T, rs map[string]*Retriever, want map[string]int64) {
	t.Helper()
	for query, id := range want {
		for name, r := range rs {
			res, err := r.Search(context.Background(), "brom", query, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) == 0 || res[0].ID != id {
				t.Errorf("%s, %q: %+v, want message %d first", name, query, res, id)
			}
		}
	}
}

// An index that outgrows the cache's budget with its vectors packed
// (packVectors) releases the vectors of its oldest items: it shrinks, its oldest lines are still found by their
// words, its newest keep every channel, and a memory keeps its vector, so
// a near duplicate of it is still found and its vector still ranks it.
func TestIndexTrimsOldVectors(t *testing.T) {
	ctx := context.Background()
	const n = 6000
	say := func(e *testEnv, from int) []*character.Message { return traders(t, e, from, n) }
	// The budget: what an index of the whole life holds packed, less
	// three quarters of the vectors it can release, so that releasing
	// them all brings it within the budget, and not within the three
	// quarters of it that trimming aims at.
	m := newEnv(t)
	m.npc(t, "brom", t0)
	say(m, 0)
	say(m, n)
	measure := m.retriever(t)
	if _, err := measure.Search(ctx, "brom", "caravan", 3); err != nil {
		t.Fatal(err)
	}
	budget := withinPacked(t, measure, 2*n)

	// The index lives through the NPC's life: a memory comes after the
	// first lines and more lines after it, so that it is among the oldest
	// items when the index is trimmed.
	e := newEnv(t)
	e.npc(t, "brom", t0)
	msgs := say(e, 0)
	var logged bytes.Buffer
	small := e.retriever(t, WithCacheBytes(budget), WithLogger(zerolog.New(&logged)))
	if _, err := small.Search(ctx, "brom", "caravan", 3); err != nil {
		t.Fatal(err)
	}
	sword := &Memory{Content: "Alice lost her silver sword at the forge.", GameTime: t0}
	if _, err := e.jour.AddMemory(ctx, "brom", sword); err != nil {
		t.Fatal(err)
	}
	if _, err := small.Search(ctx, "brom", "sword", 3); err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, say(e, n)...)
	if _, err := small.Search(ctx, "brom", "caravan", 3); err != nil {
		t.Fatal(err)
	}
	big := e.retriever(t)
	if _, err := big.Search(ctx, "brom", "caravan", 3); err != nil {
		t.Fatal(err)
	}

	x := small.npcs["brom"]
	x.mu.Lock()
	vecFrom, items, mem, dims := x.vecFrom, len(x.items), x.memPos[sword.ID], x.dims
	x.mu.Unlock()
	// Three quarters of the budget cannot be reached with the words of
	// every line kept: every vector but the newest minVectorRows items'
	// goes.
	if want := (items - minVectorRows) / blockRows * blockRows; vecFrom != want {
		t.Fatalf("vectors held from item %d of %d: want from %d, the newest %d kept, whole blocks released", vecFrom, items, want, minVectorRows)
	}
	if int(mem) >= vecFrom {
		t.Fatalf("the memory is item %d, past the released %d: the test needs it among them", mem, vecFrom)
	}
	if got, full := small.CacheStats().Bytes, big.CacheStats().Bytes; got > full-int64(vecFrom*dims)*9/10 {
		t.Errorf("the trimmed index holds %d bytes, the untrimmed %d: want about %d less", got, full, vecFrom*dims)
	}
	// Said once, though the index was trimmed after more than one search.
	if n := strings.Count(logged.String(), "outgrew the cache's budget"); n != 1 {
		t.Errorf("%d log lines of a trimmed index, want 1:\n%s", n, logged.String())
	}
	// Packing, which came first, is said once too.
	if n := strings.Count(logged.String(), "now hold them packed"); n != 1 {
		t.Errorf("%d log lines of the packing, want 1:\n%s", n, logged.String())
	}
	findsFirst(t, map[string]*Retriever{"untrimmed": big, "trimmed": small}, map[string]int64{"Trader3": msgs[3].ID, "Trader11990": msgs[11990].ID})
	for name, r := range map[string]*Retriever{"untrimmed": big, "trimmed": small} {
		ms, err := r.NearDuplicates(ctx, "brom", "Alice lost her silver swords at the forge", 0.9, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 || ms[0].Memory.ID != sword.ID {
			t.Errorf("%s index: near duplicates %+v, want the sword memory", name, ms)
		}
		res, err := r.Search(ctx, "brom", "silver sword forge", 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) == 0 || res[0].Kind != "memory" || res[0].ID != sword.ID || res[0].Parts["vector"] <= 0 {
			t.Errorf("%s index: %+v, want the sword memory first, with its vector's part", name, res)
		}
	}
}

// Building the index of an NPC with a long past keeps within the cache's
// budget as it reads: the vectors of the oldest rows are released, and
// their texts dropped, chunk by chunk, instead of all being held until the
// first search trims them. The index then finds what an index built at
// once finds, and keeps the results of the newest rows, across the last
// chunk's edge.
func TestIndexBuildKeepsWithinTheBudget(t *testing.T) {
	ctx := context.Background()
	const n = 3*loadChunk + 5 // the last chunk: 5 rows
	e := newEnv(t)
	e.npc(t, "brom", t0)
	msgs := traders(t, e, 0, n)
	big := e.retriever(t)
	if _, err := big.Search(ctx, "brom", "caravan", 3); err != nil {
		t.Fatal(err)
	}
	small := e.retriever(t, WithCacheBytes(within(big, n)))
	x, err := small.acquire(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	items, vecFrom, pending, waiting := len(x.items), x.vecFrom, len(x.pending), len(x.semText)
	_, newest := x.rows.get(itemKey{kindMessage, msgs[n-1].ID})
	_, before := x.rows.get(itemKey{kindMessage, msgs[n-7].ID})
	small.release(x)
	if items != n || vecFrom == 0 {
		t.Fatalf("built: %d items, vectors from %d; want %d items and the oldest vectors released", items, vecFrom, n)
	}
	if pending > items-vecFrom || waiting >= loadChunk {
		t.Errorf("built: %d texts wait for a vector (%d items hold one), %d for a sentence vector: want none of the released, at most a chunk's", pending, items-vecFrom, waiting)
	}
	if !newest || !before {
		t.Errorf("results kept: newest %v, the one before the last chunk %v; want both", newest, before)
	}
	findsFirst(t, map[string]*Retriever{"built at once": big, "built in chunks": small}, map[string]int64{"Trader3": msgs[3].ID, fmt.Sprintf("Trader%d", n-2): msgs[n-2].ID})
}

// With an embedder that does not tell its dimensions (a remote one), the
// first index learns them from its first vector; every index built after
// keeps within the budget as it reads, and is never sent the texts of the
// rows whose vectors it released.
func TestIndexBuildLearnsTheDimensionsOfARemoteEmbedder(t *testing.T) {
	ctx := context.Background()
	const n = 3 * loadChunk
	e := newEnv(t)
	e.npc(t, "brom", t0)
	msgs := traders(t, e, 0, n)
	off, _ := llm.NewOfflineEmbedder(0)
	full := e.retriever(t, WithEmbedder(&fakeEmbedder{emb: off}, "fake-1"))
	if _, err := full.Search(ctx, "brom", "caravan", 3); err != nil {
		t.Fatal(err)
	}
	fake := &fakeEmbedder{emb: off}
	r := e.retriever(t, WithEmbedder(fake, "fake-1"), WithCacheBytes(within(full, n)))
	if r.vectorDims() != 0 {
		t.Fatalf("dimensions known before any vector: %d", r.vectorDims())
	}
	if _, err := r.Search(ctx, "brom", "caravan", 3); err != nil {
		t.Fatal(err)
	}
	if got := r.vectorDims(); got != off.Dims() {
		t.Fatalf("dimensions after a search: %d, want %d", got, off.Dims())
	}
	r.drop("brom", r.npcs["brom"])
	fake.took()
	x, err := r.acquire(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	vecFrom, pending := x.vecFrom, len(x.pending)
	released := map[string]bool{}
	for p := range vecFrom {
		released[unstamped(msgs[p].Content)] = true
	}
	r.release(x)
	if vecFrom == 0 || pending > n-vecFrom {
		t.Fatalf("rebuilt: vectors from %d, %d texts waiting for one; want the oldest released and none of theirs waiting", vecFrom, pending)
	}
	for range 3 {
		if _, err := r.Search(ctx, "brom", "caravan", 3); err != nil {
			t.Fatal(err)
		}
	}
	for _, call := range fake.took() {
		for _, text := range call {
			if released[text] {
				t.Fatalf("the embedder was sent %q, whose vector the index released", text)
			}
		}
	}
}
