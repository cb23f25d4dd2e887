package tick

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
)

// recordingSearcher is the Retriever passing along the options of each
// bounded search.
type recordingSearcher struct {
	*journal.Retriever
	opts []journal.SearchOptions
	seen func(journal.SearchOptions) // when set, called with the options of each
}

func (r *recordingSearcher) SearchWith(ctx context.Context, npc, query string, k int, o journal.SearchOptions) ([]journal.Result, error) {
	r.opts = append(r.opts, o)
	if r.seen != nil {
		r.seen(o)
	}
	return r.Retriever.SearchWith(ctx, npc, query, k, o)
}

// recordingBrom opens an engine whose searches a recordingSearcher
// records, and puts brom.
func recordingBrom(t *testing.T) (*testEnv, *recordingSearcher) {
	t.Helper()
	var rec *recordingSearcher
	env := openEnvDeps(t, t.TempDir()+"/npcd.db", nil, 0, func(d *Deps) {
		rec = &recordingSearcher{Retriever: d.Retriever.(*journal.Retriever)}
		d.Retriever = rec
	})
	if _, err := env.eng.PutNPC(context.Background(), brom()); err != nil {
		t.Fatal(err)
	}
	return env, rec
}

// The working context of an NPC whose life is far longer than the recall
// window still shows the old line that answers what it perceives, and
// its search is the bounded one.
func TestWorkingContextRecallsBeyondTheWindow(t *testing.T) {
	env, rec := recordingBrom(t)
	ctx := context.Background()
	msgs := []*character.Message{{Role: llm.RoleUser, Turn: 1, Content: `[2026-11-01 10:00] alice says: "I buried the silver amulet under the old oak."`}}
	for i := 0; i < RecallWindow+300; i++ {
		msgs = append(msgs, &character.Message{Role: llm.RoleUser, Turn: 1,
			Content: fmt.Sprintf(`[2026-11-02 10:00] traveler%d says: "the north road is long, day %d, and the wolves are hungry."`, i%7, i)})
	}
	counter := env.eng.Counter("")
	if err := env.chars.AppendMessages(ctx, "brom", msgs, counter, 0); err != nil {
		t.Fatal(err)
	}
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	evs := []character.Event{{Kind: "say", Actor: "alice", Text: "Where is my amulet? The road was long."}}
	got, err := env.eng.workingContext(ctx, c, evs, nil, nil, nil, 2000, counter)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, RecalledHeader) || !strings.Contains(got, "silver amulet under the old oak") {
		t.Fatalf("the working context does not recall the amulet:\n%s", got)
	}
	if len(rec.opts) != 1 {
		t.Fatalf("the working context searched %d times, want once", len(rec.opts))
	}
	if o := rec.opts[0]; !o.NoFeedback || o.Window != RecallWindow || !o.NoParts || o.Live != nil {
		t.Fatalf("the working context searched with %+v, want one bounded search given the history it was given (none)", o)
	}
}

// A recalled result is left out of the working context only when every
// message it cites is in the live history.
func TestAllInTheLiveHistory(t *testing.T) {
	live := []character.Message{{ID: 40, Summary: true}, {ID: 7}, {ID: 9}, {ID: 12}}
	for _, tt := range []struct {
		ids  []int64
		want bool
	}{
		{nil, false}, {[]int64{9}, true}, {[]int64{7, 12}, true}, {[]int64{40}, true}, {[]int64{9, 10}, false}, {[]int64{3}, false},
	} {
		if got := allIn(tt.ids, live); got != tt.want {
			t.Errorf("allIn(%v) = %v, want %v", tt.ids, got, tt.want)
		}
	}
	if allIn([]int64{9}, nil) {
		t.Error("allIn with no live history = true")
	}
}

// The working context's search is given the NPC's live history, as
// stored, so that the messages of it which the search shows are not read
// again (journal.SearchOptions.Live).
func TestWorkingContextSearchIsGivenTheLiveHistory(t *testing.T) {
	env, rec := recordingBrom(t)
	ctx := context.Background()
	ids := func(ms []character.Message) []int64 {
		out := []int64{}
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	var given, stored [][]int64
	rec.seen = func(o journal.SearchOptions) {
		ms, err := env.chars.LiveMessages(ctx, "brom")
		if err != nil {
			t.Error(err)
		}
		given, stored = append(given, ids(o.Live)), append(stored, ids(ms))
		for _, m := range o.Live {
			if m.CharacterID != "brom" {
				// The search takes only the NPC's own messages from it.
				t.Errorf("the history given holds message %d of NPC %q, want brom's", m.ID, m.CharacterID)
			}
		}
	}
	askAndTick(t, env, "brom", "r", 4)
	if len(given) != 4 {
		t.Fatalf("%d searches in 4 ticks, want 4", len(given))
	}
	for i := range given {
		if i > 0 && len(stored[i]) == 0 {
			t.Fatalf("tick %d: nothing stored before it; the test ticks nothing", i+1)
		}
		if fmt.Sprint(given[i]) != fmt.Sprint(stored[i]) {
			t.Errorf("tick %d searched given the messages %v, want the live history %v", i+1, given[i], stored[i])
		}
	}
}
