package journal

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// windowTexts is a question, its reply, and turns about other things.
var windowTexts = []string{
	"Mara asks: where did you hide the lantern?",
	"Tobin says: under the old oak stump, wrapped in sacking.",
	"Mara says: the baker sells rye on market days.",
	"Tobin says: my brother keeps goats by the river.",
	"Mara says: the ferry leaves at dawn for the lantern fair.",
}

func TestWindowJoinsTheReplyToItsQuestion(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "npc", t0)
	e.say(t, "npc", t0, windowTexts, []string{"e1", "e2", "e3", "e4", "e5"})
	ctx := context.Background()

	r := e.retriever(t)
	rs, err := r.Search(ctx, "npc", "where is the lantern hidden", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 {
		t.Fatal("no results")
	}
	want := windowTexts[0] + "\n" + windowTexts[1]
	if rs[0].Content != want {
		t.Fatalf("first result %q, want the question and its reply in order: %q", rs[0].Content, want)
	}
	if diff := cmp.Diff([]string{"e1", "e2"}, sorted(rs[0].Sources.EventRefs)); diff != "" {
		t.Fatalf("first result cites (-want +got):\n%s", diff)
	}
	if len(rs[0].Sources.MessageIDs) != 2 {
		t.Fatalf("first result cites messages %v, want both", rs[0].Sources.MessageIDs)
	}
	for _, res := range rs[1:] {
		for _, ref := range res.Sources.EventRefs {
			if ref == "e1" || ref == "e2" {
				t.Fatalf("%q cites %s, which the first result holds", res.Content, ref)
			}
		}
	}

	// Without the window the reply is a result of its own, or none.
	off := e.retriever(t, WithWindow(0, 1, 0))
	rs, err = off.Search(ctx, "npc", "where is the lantern hidden", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range rs {
		if len(res.Sources.EventRefs) != 1 || strings.Contains(res.Content, "\n") {
			t.Fatalf("window off: %q cites %v, want one turn per result", res.Content, res.Sources.EventRefs)
		}
	}
}

func TestWindowCitesOnlyWhatItShows(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "npc", t0)
	long := "Tobin says: " + strings.Repeat("the stump is mossy and old and far from the road, ", 4) + "under it."
	e.say(t, "npc", t0, []string{"Mara asks: where did you hide the lantern?", long}, []string{"e1", "e2"})
	// Room for the question and less than a part's minimum after it.
	r := e.retriever(t, WithMaxContentBytes(len("Mara asks: where did you hide the lantern?")+minPartBytes-8))
	rs, err := r.Search(context.Background(), "npc", "hide lantern", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 {
		t.Fatal("no results")
	}
	if strings.Contains(rs[0].Content, "stump") {
		t.Fatalf("content %q holds the reply there is no room for", rs[0].Content)
	}
	if diff := cmp.Diff([]string{"e1"}, rs[0].Sources.EventRefs); diff != "" {
		t.Fatalf("cites (-want +got):\n%s", diff)
	}
}

func TestWithWindowValidates(t *testing.T) {
	e := newEnv(t)
	for _, o := range []Option{WithWindow(0, 2, 0.5), WithWindow(9, 2, 0.5), WithWindow(1, 9, 0.5), WithWindow(1, 2, -0.1), WithWindow(1, 2, 1.5)} {
		if _, err := NewRetriever(e.jour, o); err == nil {
			t.Error("want ErrBadOption")
		}
	}
	if _, err := NewRetriever(e.jour, WithWindow(0, 1, 0)); err != nil {
		t.Errorf("a window of one part is off, not an error: %v", err)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
