package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/npcd/npcd/bench"
)

func TestBenchTicksJSON(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"bench", "ticks", "--npcs", "1,3", "--ticks", "6", "--history", "300", "--others", "1500", "--latency", "2ms", "--json"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench ticks: %v\n%s", err, errb.String())
	}
	var got []bench.TickMeasure
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m bench.TickMeasure
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
		if m.IndexBuilds != 0 {
			t.Errorf("measurement %+v: indexes built during the ticks, with a cache that holds them all", m)
		}
		// Every tick commits: SQLite's writer was held a part of the time.
		if m.WriterBusy <= 0 {
			t.Errorf("measurement %+v: the writer was never held", m)
		}
	}
}

// Several --history sizes with --sittings: a world of each, measured in
// turn every sitting, then the CPU ratio of each history to the first.
func TestBenchTicksComparesHistories(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"bench", "ticks", "--npcs", "2", "--ticks", "4", "--history", "0,3000", "--sittings", "3", "--json"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench ticks: %v\n%s", err, errb.String())
	}
	var order []string
	var ratio *bench.TickRatio
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(`"compare"`)) {
			ratio = new(bench.TickRatio)
			if err := json.Unmarshal(sc.Bytes(), ratio); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var m bench.TickMeasure
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not one JSON object a line: %v\n%s", err, out.String())
		}
		if m.Ticks != 4 || m.CPUMSPerTick <= 0 {
			t.Errorf("measurement %+v: wrong counts or figures", m)
		}
		order = append(order, fmt.Sprintf("%d/%d", m.Sitting, m.HistoryTokens))
	}
	if want := "1/0 1/3000 2/0 2/3000 3/0 3/3000"; strings.Join(order, " ") != want {
		t.Fatalf("measurements in the order %v, want the worlds in turn: %s", order, want)
	}
	if ratio == nil || ratio.NPCs != 2 || ratio.HistoryTokens != 3000 || ratio.AgainstHistoryTokens != 0 || ratio.Sittings != 3 ||
		ratio.Min <= 0 || ratio.Min > ratio.Median || ratio.Median > ratio.Max {
		t.Fatalf("ratio %+v", ratio)
	}
}

// An index cache too small for the NPCs ticked in turn shows in the
// measurement: their indexes are built again during the ticks, and the
// table says the cache is too small.
func TestBenchTicksReportsIndexRebuilds(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"bench", "ticks", "--npcs", "6", "--ticks", "12", "--history", "30000", "--index-cache-mb", "1"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench ticks: %v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "search indexes were built again during the ticks: the index cache (--index-cache-mb 1) is too small") {
		t.Fatalf("no word of the rebuilds:\n%s", out.String())
	}
}

// The rows the ticks' searches read from the database, their NPC's index
// not keeping them, are counted per tick and per round: none while the
// cache keeps what the searches show, many once it is too small to.
func TestBenchTicksCountsRowReads(t *testing.T) {
	small := benchTicksJSON(t, "--npcs", "6", "--ticks", "12", "--history", "30000", "--index-cache-mb", "1", "--rounds")
	if small.RowReadsPerTick <= 0 {
		t.Fatalf("--index-cache-mb 1: %v row reads per tick, want some", small.RowReadsPerTick)
	}
	var sum int64
	for _, r := range small.Rounds {
		sum += r.RowReads
	}
	if want := small.RowReadsPerTick * float64(small.Ticks); math.Abs(float64(sum)-want) > 0.5 {
		t.Errorf("the rounds count %d row reads, the measurement %.1f", sum, want)
	}
	kept := benchTicksJSON(t, "--npcs", "6", "--ticks", "12", "--history", "30000", "--rounds")
	if kept.RowReadsPerTick != 0 {
		t.Errorf("the default cache: %v row reads per tick, want none", kept.RowReadsPerTick)
	}
}

// cores_busy is the share of the cores the process kept busy while the
// ticks ran: a model that answers at once keeps them far busier than one
// that each tick waits 50 ms for, one tick at a time; a share is never
// much above 1 (threads in system calls may add a little). It leaves out
// the posting of the rounds' events, which cpu_ms_per_tick counts, so it
// stays below the share that CPU would make of the ticking's time.
func TestBenchTicksSaysHowBusyTheCoresWere(t *testing.T) {
	fast := benchTicksJSON(t, "--npcs", "10", "--ticks", "300", "--workers", "4")
	slow := benchTicksJSON(t, "--npcs", "10", "--ticks", "20", "--workers", "1", "--latency", "50ms")
	for _, m := range []bench.TickMeasure{fast, slow} {
		if m.CoresBusy <= 0 || m.CoresBusy > 1.5 {
			t.Errorf("latency %v ms, %d ticks: cores_busy %v, want a share of the cores, above 0 and at most 1.5", m.LatencyMS, m.Ticks, m.CoresBusy)
		}
	}
	withPosts := fast.CPUMSPerTick / 1000 * fast.TicksPerS / float64(runtime.GOMAXPROCS(0))
	if fast.CoresBusy >= 0.995*withPosts {
		t.Errorf("cores_busy %v, and the CPU of the rounds, events posted included, makes %v of the cores: want less, without the posting", fast.CoresBusy, withPosts)
	}
	if fast.CoresBusy < 4*slow.CoresBusy {
		t.Errorf("cores_busy %v with a model that answers at once, %v with one that takes 50 ms: want the first far higher", fast.CoresBusy, slow.CoresBusy)
	}
}

// benchTicksJSON runs bench ticks with args and --json and returns its one
// measurement.
func benchTicksJSON(t *testing.T, args ...string) bench.TickMeasure {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(context.Background(), append(append([]string{"bench", "ticks"}, args...), "--json"), &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench ticks %v: %v\n%s", args, err, errb.String())
	}
	var m bench.TickMeasure
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("bench ticks %v: not one JSON object: %v\n%s", args, err, out.String())
	}
	return m
}

// --rate paces the ticks: each round's are due at even intervals, so no
// round is faster than its schedule, and a tick's overhead counts from
// when it was due, its wait for a worker included. With one worker and
// every tick due at once, the tenth tick of a round waits for the nine
// before it: the median is several ticks long, where unpaced it is one.
func TestBenchTicksRate(t *testing.T) {
	paced := benchTicksJSON(t, "--npcs", "10", "--ticks", "20", "--rate", "50")
	// Ten ticks a round, the last due 9/50 s after the first.
	if limit := 50.0 * 10 / 9; paced.RatePerS != 50 || paced.TicksPerS > limit {
		t.Errorf("--rate 50: rate_per_s %v, %.1f ticks/s; want 50 and at most %.1f", paced.RatePerS, paced.TicksPerS, limit)
	}
	alone := benchTicksJSON(t, "--npcs", "10", "--ticks", "30", "--workers", "1")
	queued := benchTicksJSON(t, "--npcs", "10", "--ticks", "30", "--workers", "1", "--rate", "1000000")
	if alone.RatePerS != 0 || queued.P50MS < 2*alone.P50MS {
		t.Errorf("one worker, every tick due at once: overhead p50 %.3f ms, against %.3f unpaced (rate_per_s %v); want at least twice as long",
			queued.P50MS, alone.P50MS, alone.RatePerS)
	}
}

// bench ticks counts the compactions run beside the ticks, which no tick
// reports, apart from those inside them, and the whole tick's p99 (model
// included) is never under npcd's own: one NPC ticked 150 times compacts.
func TestBenchTicksCountsCompactionsBesideTheTicks(t *testing.T) {
	measure := func(flags ...string) bench.TickMeasure {
		t.Helper()
		m := benchTicksJSON(t, append([]string{"--npcs", "1", "--ticks", "150", "--latency", "1ms", "--rounds"}, flags...)...)
		if m.LatencyP99MS < m.P99MS || m.LatencyP99MS < 1 {
			t.Errorf("%v: whole-tick p99 %.3f ms, under npcd's own p99 %.3f ms or the model's 1 ms", flags, m.LatencyP99MS, m.P99MS)
		}
		// --rounds: every measured round, in order, whose counts add up
		// to the measurement's.
		if len(m.Rounds) != 150 {
			t.Fatalf("%v: %d rounds reported, want 150", flags, len(m.Rounds))
		}
		var comp, beside int
		var slowest float64
		var cpu float64
		for i, r := range m.Rounds {
			if r.Round != i+1 || r.MS <= 0 || r.TicksPerS <= 0 || r.P50MS > r.P99MS || r.Ticks != 1 || r.CPUMS <= 0 {
				t.Fatalf("%v: round %d: %+v", flags, i+1, r)
			}
			comp, beside, slowest = comp+r.Compactions, beside+r.BackgroundCompactions, max(slowest, r.P99MS)
			cpu += r.CPUMS
		}
		if comp != m.Compactions || beside != m.BackgroundCompactions || slowest < m.P99MS {
			t.Errorf("%v: the rounds count %d compactions and %d beside, their slowest p99 is %.3f ms; the run %d, %d and %.3f ms",
				flags, comp, beside, slowest, m.Compactions, m.BackgroundCompactions, m.P99MS)
		}
		// The rounds' CPU adds up to the run's (both rounded to the
		// microsecond), and the aging summary holds their tenths: 15
		// rounds each, one tick a round.
		if d := cpu/150 - m.CPUMSPerTick; d > 0.01 || d < -0.01 {
			t.Errorf("%v: the rounds' CPU is %.3f ms a tick, the run's %.3f", flags, cpu/150, m.CPUMSPerTick)
		}
		a := m.Aging
		if a == nil || len(a.CPUMSPerTick) != 10 {
			t.Fatalf("%v: aging %+v, want ten tenths", flags, a)
		}
		for i, c := range a.CPUMSPerTick {
			var own float64
			for _, r := range m.Rounds[15*i : 15*i+15] {
				own += r.CPUMS
			}
			if d := c - own/15; d > 1e-9 || d < -1e-9 {
				t.Errorf("%v: tenth %d: %.4f ms a tick, its rounds %.4f", flags, i+1, c, own/15)
			}
		}
		if d := a.LastOverFirst - a.CPUMSPerTick[9]/a.CPUMSPerTick[0]; d > 1e-9 || d < -1e-9 || a.LastOverPrevious <= 0 {
			t.Errorf("%v: aging ratios %+v", flags, a)
		}
		return m
	}
	if m := measure(); m.BackgroundCompactions == 0 {
		t.Errorf("no compaction counted beside the ticks (%d inside them)", m.Compactions)
	}
	if m := measure("--background-compaction=false"); m.BackgroundCompactions != 0 || m.Compactions == 0 {
		t.Errorf("--background-compaction=false: %d compactions beside the ticks, %d inside; want none beside, some inside", m.BackgroundCompactions, m.Compactions)
	}
}

// The setup of bench ticks (the archived history, the warm-up rounds) is
// labelled bench=setup in its CPU profile, so that go tool pprof
// -tagignore bench=setup shows the measured ticks alone, the measured
// ticks round=N, N from 1, so that -tagfocus shows one round, and the
// ticks of a world given by --history history=TOKENS: the profile's
// samples carry those labels, and a run without --history carries no
// history label.
func TestBenchTicksProfileLabelsTheSetupAndTheRounds(t *testing.T) {
	labels := benchProfileLabels(t, "--history", "60000")
	if !labels["bench=setup"] {
		t.Fatalf("no sample labelled bench=setup: the setup is not labelled (labels %v)", labels)
	}
	if !labels["history=60000"] {
		t.Errorf("no sample labelled history=60000: the world of --history 60000 is not labelled (labels %v)", labels)
	}
	for l := range benchProfileLabels(t) {
		if strings.HasPrefix(l, "history=") {
			t.Errorf("label %s in a run without --history", l)
		}
	}
}

// benchProfileLabels runs bench ticks of 2 NPCs, 300 rounds, with a CPU
// profile and the extra arguments args, checks that the profile's samples
// carry measured rounds (round=1 to 300), and returns every label they
// carry. (A setup without --history is too short to be sure of a sample.)
func benchProfileLabels(t *testing.T, args ...string) map[string]bool {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	var out, errb bytes.Buffer
	args = append([]string{"bench", "ticks", "--npcs", "2", "--ticks", "600", "--workers", "2", "--cpuprofile", path}, args...)
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench ticks %v: %v\n%s", args, err, errb.String())
	}
	labels := sampleLabels(t, readProfile(t, path))
	measured := 0
	for l := range labels {
		if n, err := strconv.Atoi(strings.TrimPrefix(l, "round=")); err == nil && strings.HasPrefix(l, "round=") {
			if n > 300 {
				t.Errorf("%v: label %s: the run measured 300 rounds", args, l)
			}
			if n >= 1 {
				measured++
			}
		}
	}
	if measured == 0 {
		t.Fatalf("%v: no sample labelled with a measured round (labels %v)", args, labels)
	}
	return labels
}

// sampleLabels returns the labels the samples of the pprof profile raw
// (uncompressed) carry, as key=value: the Profile message's samples (field
// 2) hold labels (field 3) whose key (1) and value (2) index its string
// table (6).
func sampleLabels(t *testing.T, raw []byte) map[string]bool {
	t.Helper()
	var strs []string
	var pairs [][2]uint64
	eachField(t, raw, func(num int, v uint64, b []byte) {
		switch num {
		case 6:
			strs = append(strs, string(b))
		case 2:
			eachField(t, b, func(num int, _ uint64, b []byte) {
				if num != 3 {
					return
				}
				var kv [2]uint64
				eachField(t, b, func(num int, v uint64, _ []byte) {
					if num == 1 || num == 2 {
						kv[num-1] = v
					}
				})
				pairs = append(pairs, kv)
			})
		}
	})
	out := map[string]bool{}
	for _, kv := range pairs {
		if kv[0] >= uint64(len(strs)) || kv[1] >= uint64(len(strs)) {
			t.Fatalf("a label indexes past the string table (%d strings)", len(strs))
		}
		out[strs[kv[0]]+"="+strs[kv[1]]] = true
	}
	return out
}

// eachField calls f with each field of the protocol buffer message b: its
// number, and its value (varint) or bytes (length-delimited); fixed-size
// fields are skipped.
func eachField(t *testing.T, b []byte, f func(num int, v uint64, b []byte)) {
	t.Helper()
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			t.Fatal("a malformed field tag in the profile")
		}
		b = b[n:]
		num := int(tag >> 3)
		switch tag & 7 {
		case 0:
			v, n := binary.Uvarint(b)
			if n <= 0 {
				t.Fatal("a malformed varint in the profile")
			}
			f(num, v, nil)
			b = b[n:]
		case 1:
			b = b[8:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				t.Fatal("a malformed length in the profile")
			}
			f(num, 0, b[n:n+int(l)])
			b = b[n+int(l):]
		case 5:
			b = b[4:]
		default:
			t.Fatalf("wire type %d in the profile", tag&7)
		}
	}
}

// --memprofile writes a heap profile of the run, and an impossible path is
// an error naming the flag.
func TestBenchTicksMemProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pprof")
	var out, errb bytes.Buffer
	args := []string{"bench", "ticks", "--npcs", "2", "--ticks", "4", "--memprofile", path}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench ticks: %v\n%s", err, errb.String())
	}
	raw := readProfile(t, path)
	for _, s := range []string{"inuse_space", "alloc_space"} {
		if !bytes.Contains(raw, []byte(s)) {
			t.Fatalf("the heap profile holds no %q", s)
		}
	}
	errb.Reset()
	args = []string{"bench", "ticks", "--npcs", "2", "--ticks", "4", "--memprofile", filepath.Join(t.TempDir(), "missing", "heap.pprof")}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err == nil || !strings.Contains(err.Error(), "--memprofile") {
		t.Fatalf("an impossible path: %v, want an error naming --memprofile", err)
	}
}

// readProfile returns the profile at path, ungzipped.
func readProfile(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("the profile is not gzipped: %v", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestBenchTicksHTTP(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"bench", "ticks", "--npcs", "2", "--ticks", "4", "--http", "--json"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench ticks --http: %v\n%s", err, errb.String())
	}
	var modes []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m bench.TickMeasure
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not one JSON object a line: %v\n%s", err, out.String())
		}
		if m.NPCs != 2 || m.Ticks != 4 || m.TicksPerS <= 0 || m.P50MS <= 0 || m.WriterBusy != 0 {
			t.Errorf("measurement %+v: wrong counts or figures (the daemon's writer is not measured)", m)
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

func TestBenchTokensJSON(t *testing.T) {
	var out, errb bytes.Buffer
	// A small window so that truncation drops and npcd compacts within a
	// short run.
	args := []string{"bench", "tokens", "--turns", "60", "--window", "3000", "--observation-bytes", "400", "--fact-every", "6", "--sleep-every", "30", "--json"}
	if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
		t.Fatalf("bench tokens: %v\n%s", err, errb.String())
	}
	got := map[string]bench.TokenMeasure{}
	var order []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m bench.TokenMeasure
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
	// Every compaction (of a tick or of a sleep) calls the summarizer at
	// least once; the baselines call nothing.
	if npcd.Compactions == 0 || npcd.SummarizerCalls < int64(npcd.Compactions) {
		t.Errorf("npcd %+v: want compactions, each with a summarizer call", npcd)
	}
	if want := float64(npcd.SummarizerCalls) * 1000 / float64(npcd.Ticks); math.Abs(npcd.SummarizerPer1000-want) > 0.05 {
		t.Errorf("summarizer calls per 1,000 ticks = %v, want %.1f", npcd.SummarizerPer1000, want)
	}
	by := 0
	for _, n := range npcd.CompactionsBy {
		by += n
	}
	if by != npcd.Compactions || npcd.CompactionsBy["background"] == 0 {
		t.Errorf("npcd compactions by trigger %v, want them to add up to %d, some beside the ticks", npcd.CompactionsBy, npcd.Compactions)
	}
	if unb.SummarizerCalls != 0 || trunc.SummarizerCalls != 0 || unb.Compactions != 0 || trunc.Compactions != 0 {
		t.Errorf("the baselines compact nothing: %+v, %+v", unb, trunc)
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

// bench masking counts the compactions that ended over the target and
// those whose tick said why: at 2,048 tokens with a look result of ~500
// tokens every third turn, compacting inside the ticks, some do (the result
// the model has not read yet is kept whole), and every one says why. It
// counts those beside the ticks too, which no tick reports.
func TestBenchMaskingCountsCompactionsOverTheTarget(t *testing.T) {
	measure := func(extra ...string) (string, map[string]int) {
		var out, errb bytes.Buffer
		args := append([]string{"bench", "masking", "--turns", "20", "--window", "2048"}, extra...)
		if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
			t.Fatalf("bench masking %v: %v\n%s", extra, err, errb.String())
		}
		// Each run counts the summarizer calls of its own compactions,
		// every one of which makes at least one.
		triggers := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
			c := regexp.MustCompile(`^  masking (true |false): +(\d+) ticks.*compactions map\[([a-z: \d]*)\].*summarizer calls (\d+) \(([\d.]+) per 1,000 ticks\)$`).FindStringSubmatch(line)
			if c == nil {
				t.Fatalf("no summarizer calls in %q", line)
			}
			ticks, calls, per := atoi(t, c[2]), atoi(t, c[4]), c[5]
			comps := 0
			for _, kv := range strings.Fields(c[3]) {
				trigger, n, _ := strings.Cut(kv, ":")
				comps += atoi(t, n)
				triggers[trigger] += atoi(t, n)
			}
			if comps == 0 || calls < comps {
				t.Errorf("%q: %d compactions, %d summarizer calls; want some, each with a call", line, comps, calls)
			}
			if want := fmt.Sprintf("%.1f", float64(calls)*1000/float64(ticks)); per != want {
				t.Errorf("%q: %s per 1,000 ticks, want %s", line, per, want)
			}
		}
		return out.String(), triggers
	}
	out, triggers := measure("--background-compaction=false")
	m := regexp.MustCompile(`masking true .* (\d+) ended over the target of 1024 \((\d+) saying why\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no count of compactions over the target:\n%s", out)
	}
	if m[1] == "0" || m[1] != m[2] {
		t.Fatalf("%s compactions over the target, %s saying why; want some, each saying why:\n%s", m[1], m[2], out)
	}
	if triggers["background"] != 0 {
		t.Fatalf("compactions beside the ticks with --background-compaction=false:\n%s", out)
	}
	if out, triggers = measure(); triggers["background"] == 0 {
		t.Errorf("no compaction beside the ticks counted:\n%s", out)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// bench life reports ten tenths and a summary, in-process and through the
// daemon: every event ticked, prompts priced, a sleep each night, history
// archived as the life grows, and the index cache bound the flag set.
func TestBenchLife(t *testing.T) {
	for _, mode := range []string{"in-process", "http"} {
		t.Run(mode, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := []string{"bench", "life", "--events", "300", "--nights", "3", "--index-cache-mb", "3", "--json"}
			prof := filepath.Join(t.TempDir(), "life.pprof")
			if mode == "http" {
				args = append(args, "--http")
			} else {
				args = append(args, "--cpuprofile", prof)
			}
			if err := run(context.Background(), args, &out, &errb, os.Getenv); err != nil {
				t.Fatalf("bench life: %v\n%s", err, errb.String())
			}
			var tenths []bench.LifeTenth
			var sum bench.LifeSummary
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			for i, line := range lines {
				var err error
				if i == len(lines)-1 {
					err = json.Unmarshal([]byte(line), &sum)
				} else {
					var m bench.LifeTenth
					err = json.Unmarshal([]byte(line), &m)
					tenths = append(tenths, m)
				}
				if err != nil {
					t.Fatalf("not one JSON object a line: %v\n%s", err, out.String())
				}
			}
			if len(tenths) != 10 || sum.Kind != "summary" || sum.Mode != mode {
				t.Fatalf("%d tenths and summary %+v, want ten tenths then a %s summary:\n%s", len(tenths), sum, mode, out.String())
			}
			events, ticks, sleeps, compactions := 0, 0, 0, 0
			for i, m := range tenths {
				if m.Kind != "tenth" || m.Tenth != i+1 || m.Events != 30 {
					t.Errorf("tenth %d: %+v, want tenth %d of 30 events", i, m, i+1)
				}
				// Every event is ticked, and every third asks for a look
				// or the stock, which the game answers before a second tick.
				if m.Ticks < m.Events || m.TicksPerS <= 0 || m.P50MS <= 0 || m.P50MS > m.P99MS || m.CPUMSPerTick <= 0 ||
					m.PromptTokensPerTick <= 0 || m.HeapInuseMiB <= 0 || m.RSSMiB <= 0 || m.LiveMessages <= 0 {
					t.Errorf("tenth %d: implausible figures %+v", i+1, m)
				}
				events += m.Events
				ticks += m.Ticks
				sleeps += m.Sleeps
				compactions += m.EmergencyCompactions + m.BackgroundCompactions + m.SleepCompactions
			}
			if events != 300 || ticks <= 300 || ticks != sum.Ticks {
				t.Errorf("%d events and %d ticks in the tenths, summary %d ticks: want 300 events, more ticks, the same count", events, ticks, sum.Ticks)
			}
			if sleeps != 3 || sum.Sleeps != 3 || tenths[9].Sleeps != 1 || tenths[9].Day != 3 {
				t.Errorf("%d sleeps in the tenths, %d in the summary, last tenth %+v: want one a night, the last after day 3", sleeps, sum.Sleeps, tenths[9])
			}
			if compactions == 0 || tenths[9].ArchivedMessages <= tenths[0].ArchivedMessages {
				t.Errorf("%d compactions, archived %d → %d: a life that outgrows its window compacts and archives", compactions,
					tenths[0].ArchivedMessages, tenths[9].ArchivedMessages)
			}
			if fi, err := os.Stat(prof); mode == "in-process" && (err != nil || fi.Size() == 0) {
				t.Errorf("--cpuprofile wrote no profile: %v", err)
			}
			if sum.IndexCacheMB != 3 || sum.PeakRSSMiB <= 0 || sum.DBMiB <= 0 || sum.CPURatio <= 0 || sum.P50Ratio <= 0 || sum.PromptRatio <= 0 {
				t.Errorf("summary %+v: want the 3 MiB cache bound the app was given, and sane figures", sum)
			}
		})
	}
}

// bench life refuses bad flags, naming the flag.
func TestBenchLifeRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--events", []string{"--events", "9"}},
		{"--nights", []string{"--nights", "0"}},
		{"--nights", []string{"--events", "100", "--nights", "101"}},
		{"--window", []string{"--window", "100"}},
		{"--observation-bytes", []string{"--observation-bytes", "0"}},
		{"--index-cache-mb", []string{"--index-cache-mb", "0"}},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), append([]string{"bench", "life"}, c.args...), &out, &errb, os.Getenv)
		if err == nil || !strings.HasPrefix(err.Error(), c.flag+" ") {
			t.Errorf("bench life %v: %v, want a refusal naming %s", c.args, err, c.flag)
		}
		if out.Len() > 0 {
			t.Errorf("bench life %v printed before refusing:\n%s", c.args, out.String())
		}
	}
}
