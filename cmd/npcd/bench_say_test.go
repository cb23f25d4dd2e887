package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/npcd/npcd/bench"
)

// bench say runs the daemon, measures every say it posts, and refuses bad
// flags naming them.
func TestBenchSay(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"bench", "say", "--npcs", "3", "--says", "6", "--clients", "2", "--debounce", "2ms", "--max-wait", "20ms", "--json"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench say: %v\n%s", err, errb.String())
	}
	var m bench.SayMeasure
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, out.String())
	}
	if m.NPCs != 3 || m.Says != 6 || m.P50MS < 2 || m.P99MS < m.P50MS || m.MaxMS < m.P99MS {
		t.Errorf("measurement %+v: wrong counts, or a latency below the debounce", m)
	}
	for _, tc := range []struct{ flag, value string }{
		{"--npcs", "0"}, {"--says", "0"}, {"--clients", "9"}, {"--debounce", "0s"}, {"--max-wait", "1ms"},
	} {
		err := run(context.Background(), []string{"bench", "say", "--npcs", "3", "--clients", "1", tc.flag, tc.value}, &out, &errb, os.Getenv)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s %s: %v, want a refusal naming the flag", tc.flag, tc.value, err)
		}
	}
}
