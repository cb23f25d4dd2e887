package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestLoCoMoWithSleep runs the fixture with what the daemon adds
// (compactor, consolidator, sleeps between sessions) and checks the JSON
// report's figures.
func TestLoCoMoWithSleep(t *testing.T) {
	var progress bytes.Buffer
	opts := WithSleep(Options{Events: fixtureEvents, Questions: fixtureQuestions, Ks: []int{1, 2}, Details: true,
		Progress: &progress, Dir: t.TempDir()}, true, true)
	got, err := LoCoMo(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Headline   map[string]float64        `json:"headline"`
		Categories map[string]map[string]any `json:"categories"`
		Questions  []struct {
			QID       string     `json:"qid"`
			Retrieved [][]string `json:"retrieved"`
		} `json:"questions"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Headline["recall@2"] != 1 || rep.Headline["questions"] != 6 || rep.Headline["tokens_per_query"] <= 0 {
		t.Fatalf("headline %v, want every evidence turn within the top 2 of 6 questions", rep.Headline)
	}
	if len(rep.Questions) != 7 || len(rep.Questions[0].Retrieved) == 0 {
		t.Fatalf("details: %d questions, want the 7 with evidence, each with what it retrieved", len(rep.Questions))
	}
	if len(rep.Categories) != 5 {
		t.Fatalf("categories %v, want 1 to 5", rep.Categories)
	}
	if !strings.Contains(progress.String(), "done") {
		t.Errorf("no progress: %q", progress.String())
	}
}

// AblateAll runs the fixture once with every signal and once with each
// off; the ablation table has one line per signal.
func TestAblateAll(t *testing.T) {
	opts := WithSleep(Options{Events: fixtureEvents, Questions: fixtureQuestions, Ks: []int{1, 2}, Dir: t.TempDir()}, true, true)
	full, ablated, err := AblateAll(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(ablated) != len(Ablations) {
		t.Fatalf("%d ablated runs, want one per signal (%d)", len(ablated), len(Ablations))
	}
	var out bytes.Buffer
	full.WriteTable(&out)
	WriteAblations(&out, full, ablated)
	for _, name := range append(slices.Sorted(maps.Keys(Ablations)), "signal off", "(none)", "Δ recall@2") {
		if !strings.Contains(out.String(), name) {
			t.Errorf("no %q in the ablation output:\n%s", name, out.String())
		}
	}
	opts.Ablate = "window"
	one, err := LoCoMo(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	one.WriteTable(&out)
	if !strings.HasPrefix(out.String(), "ablation: window") {
		t.Errorf("one ablation does not say what it switched off:\n%s", out.String())
	}
}
