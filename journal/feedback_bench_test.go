package journal

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
)

// BenchmarkSearch100kMessages searches one NPC that perceived 100k lines
// over a year, with every signal (default) and without the two that read
// the leading perceived messages (feedback and session): the cost of
// pseudo-relevance feedback's second keyword search and ranking. It
// reports the p50 and p99 latency of a search, the index already in
// memory.
func BenchmarkSearch100kMessages(b *testing.B) { benchSearchMessages(b, 100_000) }

// BenchmarkSearch1kMessages is BenchmarkSearch100kMessages for an NPC of a
// hundredth of the life: the bounded search (working-context) should cost
// about the same at both sizes.
func BenchmarkSearch1kMessages(b *testing.B) { benchSearchMessages(b, 1000) }

func benchSearchMessages(b *testing.B, n int) {
	e := newEnv(b)
	e.npc(b, "brom", t0)
	c := newBenchCorpus()
	r := rand.New(rand.NewPCG(5, 6))
	ctx := context.Background()
	const batch = 2000
	for start := 0; start < n; start += batch {
		ms := make([]*character.Message, 0, batch)
		for i := start; i < min(n, start+batch); i++ {
			// In order on the game's clock, about 270 lines a day.
			at := t0.Add(-time.Duration(n-i) * 315 * time.Second)
			who := benchWords.who[r.IntN(len(benchWords.who))]
			ms = append(ms, &character.Message{CharacterID: "brom", State: character.StateArchived, Role: llm.RoleUser,
				Content: who + " says: " + c.text(), GameTime: at, Turn: int64(i + 1)})
		}
		if err := e.db.WithContext(ctx).CreateInBatches(ms, 500).Error; err != nil {
			b.Fatal(err)
		}
	}
	queries := benchQueries(c)
	for _, v := range []struct {
		name   string
		opts   []Option
		search SearchOptions
	}{{"default", nil, SearchOptions{}}, {"no-feedback-session", []Option{WithFeedback(0), WithSession(0)}, SearchOptions{}},
		{"working-context", nil, SearchOptions{NoFeedback: true, Window: 2048}}} {
		b.Run(v.name, func(b *testing.B) {
			ret := e.retriever(b, v.opts...)
			if _, err := ret.Search(ctx, "brom", queries[0], 10); err != nil { // builds the index
				b.Fatal(err)
			}
			var took []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				rs, err := ret.SearchWith(ctx, "brom", queries[i%len(queries)], 10, v.search)
				took = append(took, time.Since(start))
				if err != nil || len(rs) != 10 {
					b.Fatalf("search: %d results, %v", len(rs), err)
				}
				i++
			}
			reportLatency(b, took)
		})
	}
}
