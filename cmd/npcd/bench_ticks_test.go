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

func TestBenchTicksJSON(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"bench", "ticks", "--npcs", "1,3", "--ticks", "6", "--history", "300", "--others", "1500", "--latency", "2ms", "--json"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench ticks: %v\n%s", err, errb.String())
	}
	var got []tickMeasure
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m tickMeasure
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not one JSON object a line: %v\n%s", err, out.String())
		}
		got = append(got, m)
	}
	if len(got) != 2 || got[0].NPCs != 1 || got[1].NPCs != 3 {
		t.Fatalf("measurements %+v, want one for 1 and one for 3 NPCs", got)
	}
	for _, m := range got {
		if m.Ticks != 6 || m.TicksPerS <= 0 || m.HistoryTokens != 300 || m.OtherMessages != 1500 || m.LatencyMS != 2 {
			t.Errorf("measurement %+v: wrong counts or settings", m)
		}
		// Every tick calls the model once at least, and the fake model
		// waits 2ms: that time is the model's, not npcd's.
		if m.ModelMS < 2 || m.P50MS < 0 || m.P50MS > m.P99MS || m.AllocsPerTick <= 0 || m.PeakRSSMiB <= 0 || m.CPUMSPerTick <= 0 {
			t.Errorf("measurement %+v: implausible figures", m)
		}
	}
}

// Every bench command refuses a bad flag naming it first.
func TestBenchRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"ticks", "--ticks", "0"},
		{"ticks", "--npcs", "0"},
		{"ticks", "--history", "-1"},
		{"ticks", "--others", "-1"},
		{"ticks", "--latency", "-1s"},
		{"ticks", "--workers", "0"},
		{"ticks", "--db", "./bench.db"},
		{"tokens", "--turns", "0"},
		{"tokens", "--fact-every", "0"},
		{"tokens", "--observation-bytes", "0"},
		{"tokens", "--sleep-every", "-1"},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), append([]string{"bench"}, args...), &out, &errb, os.Getenv)
		if err == nil || !strings.HasPrefix(err.Error(), args[1]+" ") {
			t.Errorf("%v: err %v, want one naming the flag", args, err)
		}
	}
}

func TestBenchTicksHTTP(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"bench", "ticks", "--npcs", "2", "--ticks", "4", "--http", "--json"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench ticks --http: %v\n%s", err, errb.String())
	}
	var modes []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m tickMeasure
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not one JSON object a line: %v\n%s", err, out.String())
		}
		if m.NPCs != 2 || m.Ticks != 4 || m.TicksPerS <= 0 || m.P50MS <= 0 {
			t.Errorf("measurement %+v: wrong counts or figures", m)
		}
		modes = append(modes, m.Mode)
	}
	if strings.Join(modes, ",") != "http-npc,http-batch" {
		t.Fatalf("modes %v, want a per-NPC and a batch measurement", modes)
	}
	err := run(context.Background(), []string{"bench", "ticks", "--http", "--latency", "1ms"}, &out, &errb, os.Getenv)
	if err == nil || !strings.HasPrefix(err.Error(), "--http ") {
		t.Fatalf("--http with --latency: %v, want a refusal", err)
	}
}
