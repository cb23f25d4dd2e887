package sleep_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
)

// A transcript is cut into chunks within the budget, in order, each with
// the tokens its lines count (one more for each line's end), so the
// summarizer's input is known without counting the chunk again.
func TestChunkTranscriptCountsEachChunk(t *testing.T) {
	counter := llm.NewCounter(llm.BuiltinModel)
	var lines []string
	for i := range 60 {
		lines = append(lines, fmt.Sprintf("[turn %d] Traveler: the price of %s is %d silver", i, strings.Repeat("iron ", i%7+1), i*3))
	}
	lines = append(lines, strings.Repeat("a very long line ", 80)) // over budget alone
	const budget = 120
	chunks, tokens := sleep.ChunkTranscript(lines, budget, counter)
	if len(chunks) < 2 || len(chunks) != len(tokens) {
		t.Fatalf("%d chunks, %d counts: want several, one count each", len(chunks), len(tokens))
	}
	if got := slices.Concat(chunks...); !slices.Equal(got, lines) {
		t.Fatal("the chunks do not hold the lines in order")
	}
	for i, c := range chunks {
		want := 0
		for _, l := range c {
			want += counter.Text(l) + 1
		}
		if tokens[i] != want {
			t.Errorf("chunk %d: %d tokens reported, its lines count %d", i, tokens[i], want)
		}
		if want > budget && len(c) > 1 {
			t.Errorf("chunk %d: %d tokens in %d lines, over the budget of %d", i, want, len(c), budget)
		}
		if joined := counter.Text(strings.Join(c, "\n")); joined > tokens[i] {
			t.Errorf("chunk %d: the joined text counts %d, more than the %d reported", i, joined, tokens[i])
		}
	}
}
