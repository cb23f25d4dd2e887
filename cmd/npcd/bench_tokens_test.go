package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestBenchTokensJSON(t *testing.T) {
	var out, errb bytes.Buffer
	// A small window so that truncation drops and npcd compacts within a
	// short run.
	args := []string{"bench", "tokens", "--turns", "60", "--window", "3000", "--observation-bytes", "400", "--fact-every", "6", "--sleep-every", "30", "--json"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench tokens: %v\n%s", err, errb.String())
	}
	got := map[string]tokenMeasure{}
	var order []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m tokenMeasure
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not one JSON object a line: %v\n%s", err, out.String())
		}
		got[m.Strategy] = m
		order = append(order, m.Strategy)
	}
	if strings.Join(order, ",") != "npcd,unbounded,truncation" {
		t.Fatalf("strategies %v, want npcd, unbounded, truncation", order)
	}
	npcd, unb, trunc := got["npcd"], got["unbounded"], got["truncation"]
	for _, m := range got {
		// Every turn ticks at least once; every sixth plants a fact.
		if m.Ticks < 60 || m.Facts != 10 || m.Mean <= 0 || m.P50 > m.P95 || m.Total <= 0 {
			t.Errorf("%+v: implausible counts", m)
		}
		if m.Ticks != npcd.Ticks {
			t.Errorf("%s priced %d ticks, npcd ran %d: the baselines must price the same run", m.Strategy, m.Ticks, npcd.Ticks)
		}
	}
	// The unbounded history sends everything, so it holds every fact and
	// costs the most; truncation stays under the window and forgets.
	if unb.Reached != unb.Facts || unb.Share != 1 {
		t.Errorf("unbounded %+v: must reach every fact at 100%% of itself", unb)
	}
	if trunc.P95 > 3000 || trunc.Mean >= unb.Mean || trunc.Reached >= trunc.Facts {
		t.Errorf("truncation %+v: must stay under the window and lose old facts (unbounded mean %d)", trunc, unb.Mean)
	}
	if npcd.P95 > 3000 || npcd.Mean >= unb.Mean || npcd.Share >= 1 {
		t.Errorf("npcd %+v: must stay under the window and cost less than unbounded (mean %d)", npcd, unb.Mean)
	}
	if npcd.Reached < npcd.Facts*9/10 {
		t.Errorf("npcd reaches %d/%d planted facts", npcd.Reached, npcd.Facts)
	}
}

// bench masking at a small window must run: the default reply budget does
// not fit 2,048 tokens beside the tools and a summary.
func TestBenchMaskingSmallWindow(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"bench", "masking", "--turns", "12", "--window", "2048", "--observation-bytes", "600"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench masking at 2048: %v\n%s", err, errb.String())
	}
	if n := strings.Count(out.String(), "prompt tokens per tick"); n != 2 {
		t.Fatalf("want a line for masking on and off, got:\n%s", out.String())
	}
}
