package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
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
