package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/npcd/npcd/eval"
)

// TestEvalLocomoCommand runs `npcd eval locomo` on the invented fixture of
// package eval, through the real wiring (compactor, consolidator, sleeps
// between sessions), and checks the JSON report's figures.
func TestEvalLocomoCommand(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"eval", "locomo", "--events", "../../eval/testdata/events.jsonl", "--questions", "../../eval/testdata/questions.jsonl",
		"--k", "1,2", "--json", "--details"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("eval: %v\n%s", err, errb.String())
	}
	var rep struct {
		Headline   map[string]float64        `json:"headline"`
		Categories map[string]map[string]any `json:"categories"`
		Questions  []struct {
			QID       string     `json:"qid"`
			Retrieved [][]string `json:"retrieved"`
		} `json:"questions"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	if rep.Headline["recall@2"] != 1 || rep.Headline["questions"] != 6 || rep.Headline["tokens_per_query"] <= 0 {
		t.Fatalf("headline %v, want every evidence turn within the top 2 of 6 questions", rep.Headline)
	}
	if len(rep.Questions) != 7 || len(rep.Questions[0].Retrieved) == 0 {
		t.Fatalf("--details: %d questions, want the 7 with evidence, each with what it retrieved", len(rep.Questions))
	}
	if len(rep.Categories) != 5 {
		t.Fatalf("categories %v, want 1 to 5", rep.Categories)
	}
	if !strings.Contains(errb.String(), "done") {
		t.Errorf("no progress on stderr: %q", errb.String())
	}
}

func TestEvalLocomoNeedsItsFiles(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"eval", "locomo", "--events", "nope.jsonl"}, &out, &errb, os.Getenv)
	if err == nil || !strings.Contains(err.Error(), "questions") {
		t.Fatalf("err = %v, want the missing --questions named", err)
	}
}

// --ablate all runs the fixture once with every signal and once with each
// off, and prints one line per signal; an unknown signal is refused.
func TestEvalLocomoAblate(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"eval", "locomo", "--events", "../../eval/testdata/events.jsonl", "--questions", "../../eval/testdata/questions.jsonl",
		"--k", "1,2", "--ablate", "all"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("eval: %v\n%s", err, errb.String())
	}
	for _, name := range append(slices.Sorted(maps.Keys(eval.Ablations)), "signal off", "(none)", "Δ recall@2") {
		if !strings.Contains(out.String(), name) {
			t.Errorf("no %q in the ablation output:\n%s", name, out.String())
		}
	}
	out.Reset()
	args = append(args[:len(args)-1], "window")
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("eval: %v", err)
	}
	if !strings.HasPrefix(out.String(), "ablation: window") {
		t.Errorf("one ablation does not say what it switched off:\n%s", out.String())
	}
	args[len(args)-1] = "telepathy"
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err == nil || !strings.Contains(err.Error(), "telepathy") {
		t.Fatalf("err = %v, want the unknown signal named", err)
	}
}
