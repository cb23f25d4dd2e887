package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestEvalLocomoNeedsItsFiles(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"eval", "locomo", "--events", "nope.jsonl"}, &out, &errb, os.Getenv)
	if err == nil || !strings.Contains(err.Error(), "questions") {
		t.Fatalf("err = %v, want the missing --questions named", err)
	}
}

// --ablate all prints one line per signal; an unknown signal is refused.
func TestEvalLocomoAblateFlag(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"eval", "locomo", "--events", "../../eval/testdata/events.jsonl", "--questions", "../../eval/testdata/questions.jsonl",
		"--k", "1,2", "--ablate", "all"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("eval: %v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "signal off") {
		t.Errorf("no ablation table:\n%s", out.String())
	}
	args[len(args)-1] = "telepathy"
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err == nil || !strings.Contains(err.Error(), "telepathy") {
		t.Fatalf("err = %v, want the unknown signal named", err)
	}
}
