package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/npcd/npcd/aihistory"
	"github.com/npcd/npcd/internal/text"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/npcd/npcd/api"
	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/scenarios"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
)

// truth is what the database of a run holds, read directly.
type truth struct {
	c        *character.Character
	records  []sleep.Record
	live     []character.Message
	archived []character.Message
	entries  []journal.Entry
	memories []journal.Memory
	profiles []character.Profile
}

func readTruth(t *testing.T, path, npc string) *truth {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	chars, jour := character.NewStore(db), journal.NewStore(db)
	tr := &truth{}
	if tr.c, err = chars.Get(ctx, npc); err != nil {
		t.Fatal(err)
	}
	if err := db.Where("character_id = ?", npc).Order("id").Find(&tr.records).Error; err != nil {
		t.Fatal(err)
	}
	if tr.live, err = chars.History(ctx, npc, character.HistoryQuery{State: character.StateLive}); err != nil {
		t.Fatal(err)
	}
	if tr.archived, err = chars.History(ctx, npc, character.HistoryQuery{State: character.StateArchived}); err != nil {
		t.Fatal(err)
	}
	if tr.entries, err = jour.List(ctx, npc, journal.ListQuery{}); err != nil {
		t.Fatal(err)
	}
	if tr.memories, err = jour.Memories(ctx, npc, journal.MemoryQuery{Superseded: true}); err != nil {
		t.Fatal(err)
	}
	if tr.profiles, err = chars.Profiles(ctx, npc); err != nil {
		t.Fatal(err)
	}
	return tr
}

// runAIHistoryCmd runs `npcd aihistory args...` and returns its output.
func runAIHistoryCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := map[string]string{"COLUMNS": "160"}
	err := run(context.Background(), append([]string{"aihistory"}, args...), &out, &errOut, func(k string) string { return env[k] })
	return out.String(), err
}

func mustAIHistory(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runAIHistoryCmd(t, args...)
	if err != nil {
		t.Fatalf("npcd aihistory %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// decodeOutput decodes the JSON output of a view into v, strictly.
func decodeOutput(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("output is not the view's JSON: %v\n%s", err, text.ClipRunes(out, 400))
	}
}

func sortedIDs(ids []int64) []int64 {
	out := append([]int64(nil), ids...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// scenarioDB runs an example scenario into dir and returns its database.
func scenarioDB(t *testing.T, file, dir string) string {
	t.Helper()
	sc, err := scenarios.Load(filepath.Join("..", "..", "scenarios", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "npcd.db")
	rep, err := scenarios.RunAt(context.Background(), sc, "", path, scenarioOpener(noEnv), nil)
	if err != nil {
		t.Fatalf("scenario %s: %v", file, err)
	}
	if !rep.Passed {
		t.Logf("scenario %s did not pass its own checks; its database is inspected all the same", file)
	}
	return path
}

// TestAIHistory runs every view over the database the blacksmith scenario
// leaves: Brom through a day of customers, two scheduled sleeps, emergency
// and sleep compactions, consolidated memories and beliefs.
func TestAIHistory(t *testing.T) {
	path := scenarioDB(t, "blacksmith.yaml", t.TempDir())
	tr := readTruth(t, path, "brom")
	triggers := map[string]int{}
	for _, rec := range tr.records {
		triggers[rec.Trigger]++
	}
	if triggers[sleep.TriggerEmergency] == 0 || triggers[sleep.TriggerSleep] == 0 || len(tr.archived) < 20 {
		t.Fatalf("the scenario compacted %v and archived %d messages; the views need emergency and sleep compactions and 20 archived messages",
			triggers, len(tr.archived))
	}
	db := "--db=" + path
	var summary *character.Message
	for i := range tr.live {
		if tr.live[i].Summary {
			summary = &tr.live[i]
		}
	}
	if summary == nil {
		t.Fatal("no live summary after the scenario")
	}

	t.Run("overview", func(t *testing.T) {
		out := mustAIHistory(t, "brom", db)
		want := []string{
			fmt.Sprintf("%.1f%% of %s tokens", 100*round3(tr.c.Utilization()), text.Thousands(tr.c.ContextWindow)),
			fmt.Sprintf("MESSAGES     %d live, %s archived", tr.c.State.LiveMessages, text.Thousands(tr.c.State.ArchivedMessages)),
			fmt.Sprintf("%d emergency", triggers[sleep.TriggerEmergency]),
			fmt.Sprintf("%d sleep", triggers[sleep.TriggerSleep]),
			fmt.Sprintf("last #%d", tr.records[len(tr.records)-1].ID),
			"WARNING      the context summary has been rewritten",
			"next: unknown (read from the database file",
			fmt.Sprintf("[CONTEXT SUMMARY] m:%d", summary.ID),
			strings.SplitN(strings.TrimSpace(strings.TrimPrefix(summary.Content, character.SummaryPrefix)), "\n", 2)[0],
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("overview lacks %q:\n%s", w, out)
			}
		}
		var o api.Overview
		decodeOutput(t, mustAIHistory(t, "brom", db, "--json"), &o)
		if diff := cmp.Diff(triggers, o.CompactionsByTrigger); diff != "" {
			t.Errorf("compactions by trigger (-records +overview):\n%s", diff)
		}
		if o.Context.Tokens != tr.c.ContextTokens() || o.Summary == nil || o.Summary.ID != summary.ID || o.Sleep.Known {
			t.Errorf("overview JSON = context %+v, summary %+v, sleep %+v", o.Context, o.Summary, o.Sleep)
		}
	})

	t.Run("history", func(t *testing.T) {
		out := mustAIHistory(t, "brom", "history", db)
		lines := strings.Split(out, "\n")
		first := -1
		for i, l := range lines {
			if strings.Contains(l, "m:") && first < 0 {
				first = i
			}
		}
		if first < 0 || !strings.Contains(lines[first], fmt.Sprintf("m:%d", summary.ID)) || !strings.Contains(lines[first], "summary") {
			t.Errorf("the first row is not the summary m:%d:\n%s", summary.ID, out)
		}
		for _, m := range tr.live {
			if !strings.Contains(out, fmt.Sprintf("│ m:%d ", m.ID)) {
				t.Errorf("live m:%d missing:\n%s", m.ID, out)
			}
		}
		masked := false
		for _, m := range tr.live {
			masked = masked || m.Masked
		}
		if masked != strings.Contains(out, "⊘masked") {
			t.Errorf("masked marker shown %v, live history has masked messages %v", !masked, masked)
		}
	})

	t.Run("history pages with boundaries", func(t *testing.T) {
		n := len(tr.archived)
		out := mustAIHistory(t, "brom", "history", "--archived", "--limit", "10", db)
		ids := rowIDs(out, "m:")
		var want []int64
		for _, m := range tr.archived[n-10:] {
			want = append(want, m.ID)
		}
		if diff := cmp.Diff(want, ids); diff != "" {
			t.Fatalf("newest archived page (-want +got):\n%s", diff)
		}
		if !strings.Contains(out, "── archived by compaction #") {
			t.Errorf("no compaction boundary:\n%s", out)
		}
		// The footer is the command for the next page: run it.
		_, next, ok := strings.Cut(out, "Older: ")
		if !ok {
			t.Fatalf("no next-page hint:\n%s", out)
		}
		args := strings.Fields(strings.TrimPrefix(strings.TrimSpace(next), "npcd aihistory "))
		wantArgs := []string{"brom", "history", "--archived", "--db", path, "--limit", "10", "--before", strconv.FormatInt(want[0], 10)}
		if diff := cmp.Diff(wantArgs, args); diff != "" {
			t.Errorf("next-page hint (-want +got):\n%s", diff)
		}
		ids = rowIDs(mustAIHistory(t, args...), "m:")
		want = want[:0]
		for _, m := range tr.archived[n-20 : n-10] {
			want = append(want, m.ID)
		}
		if diff := cmp.Diff(want, ids); diff != "" {
			t.Errorf("second page (-want +got):\n%s", diff)
		}
	})

	t.Run("history of a turn", func(t *testing.T) {
		var hr api.HistoryResponse
		decodeOutput(t, mustAIHistory(t, "brom", "history", "--turn", "2", "--json", db), &hr)
		if len(hr.Messages) < 2 {
			t.Fatalf("turn 2 has %d messages, want at least what was perceived and the answer", len(hr.Messages))
		}
		for _, m := range hr.Messages {
			if m.Turn != 2 {
				t.Errorf("m:%d of turn %d in the history of turn 2", m.ID, m.Turn)
			}
		}
		if len(hr.Compactions) == 0 {
			t.Errorf("turn 2 was archived, yet no compaction came with it")
		}
	})

	t.Run("journal by type", func(t *testing.T) {
		var jr api.JournalResponse
		decodeOutput(t, mustAIHistory(t, "brom", "journal", "--type", "context_synthesis", "--json", db), &jr)
		if len(jr.Entries) != len(tr.records) {
			t.Errorf("%d context_synthesis entries, want one per compaction (%d)", len(jr.Entries), len(tr.records))
		}
		for _, e := range jr.Entries {
			if e.Type != journal.TypeContextSynthesis {
				t.Errorf("j:%d is a %s entry", e.ID, e.Type)
			}
		}
		out := mustAIHistory(t, "brom", "journal", "--limit", "5", db)
		if got := rowIDs(out, "j:"); len(got) != 5 || got[4] != tr.entries[len(tr.entries)-1].ID {
			t.Errorf("journal --limit 5 rows %v, want the newest five ending with j:%d", got, tr.entries[len(tr.entries)-1].ID)
		}
	})

	t.Run("profiles", func(t *testing.T) {
		out := mustAIHistory(t, "brom", "profiles", db)
		superseded := 0
		for _, p := range tr.profiles {
			if !strings.Contains(out, p.Name) {
				t.Errorf("profile %q missing", p.Name)
			}
			for _, f := range p.Facts {
				if f.SupersededAt != nil {
					superseded++
				}
			}
		}
		if want := fmt.Sprintf("%d superseded", superseded); !strings.Contains(out, want) {
			t.Errorf("profiles lack %q:\n%s", want, out)
		}
		if superseded > 0 && !strings.Contains(out, "superseded 20") {
			t.Errorf("no superseded belief shown as such:\n%s", out)
		}
	})

	t.Run("memory", func(t *testing.T) {
		var mr api.MemoryResponse
		decodeOutput(t, mustAIHistory(t, "brom", "memory", "ruby", "hilt", "-k", "3", "--json", db), &mr)
		if len(mr.Results) == 0 || len(mr.Results) > 3 {
			t.Fatalf("%d results for ruby hilt, want 1 to 3", len(mr.Results))
		}
		if top := mr.Results[0]; !strings.Contains(strings.ToLower(top.Content), "ruby") || top.ScoreParts[journal.PartKeyword] <= 0 {
			t.Errorf("top result %+v is not the ruby hilt matched by keyword", top)
		}
		for _, res := range mr.Results {
			why := res.ScoreParts[journal.PartKeyword] + res.ScoreParts[journal.PartVector] + res.ScoreParts[journal.PartSemantic] + res.ScoreParts[journal.PartNeighbour]
			if why <= 0 || len(res.Sources.MessageIDs)+len(res.Sources.JournalIDs)+len(res.Sources.EventRefs) == 0 {
				t.Errorf("result %+v does not explain why it matched", res)
			}
		}
		out := mustAIHistory(t, "brom", "memory", "ruby", "hilt", db)
		for _, w := range []string{"KEYWORD", mr.Results[0].Ref, "show " + mr.Results[0].Ref} {
			if !strings.Contains(out, w) {
				t.Errorf("memory table lacks %q:\n%s", w, out)
			}
		}
	})

	t.Run("compactions", func(t *testing.T) {
		out := mustAIHistory(t, "brom", "compactions", db)
		for _, rec := range tr.records {
			row := fmt.Sprintf("│ #%d ", rec.ID)
			if !strings.Contains(out, row) || !strings.Contains(out, fmt.Sprintf("%s → %s", text.Thousands(rec.TokensBefore), text.Thousands(rec.TokensAfter))) {
				t.Errorf("compaction #%d missing:\n%s", rec.ID, out)
			}
		}
		var cr api.CompactionsResponse
		decodeOutput(t, mustAIHistory(t, "brom", "compactions", "--limit", "2", "--json", db), &cr)
		if len(cr.Compactions) != 2 || cr.NextBefore == nil || *cr.NextBefore != cr.Compactions[0].ID {
			t.Errorf("--limit 2 = %+v, want the newest two and the next page", cr)
		}
	})

	t.Run("diff", func(t *testing.T) {
		for _, rec := range tr.records {
			var d api.DiffResponse
			decodeOutput(t, mustAIHistory(t, "brom", "diff", strconv.FormatInt(rec.ID, 10), "--json", db), &d)
			if d.Summary == nil || len(d.Replaced) != rec.MessagesCompacted {
				t.Fatalf("diff #%d: summary %v, %d replaced; want %d", rec.ID, d.Summary, len(d.Replaced), rec.MessagesCompacted)
			}
			for _, c := range d.Lost {
				word := regexp.MustCompile(`(?i)(^|[^\pL\pN])` + regexp.QuoteMeta(c.Text) + `($|[^\pL\pN])`)
				if word.MatchString(d.Summary.Content) {
					t.Errorf("diff #%d lists %q as lost, yet the summary holds it", rec.ID, c.Text)
				}
			}
			for _, c := range d.Kept {
				if len(c.KeptIn) == 0 || len(c.MessageIDs) == 0 {
					t.Errorf("diff #%d kept %+v without saying where", rec.ID, c)
				}
			}
		}
		out := mustAIHistory(t, "brom", "diff", strconv.FormatInt(tr.records[0].ID, 10), db)
		for _, w := range []string{"SUMMARY it wrote", "REPLACED (", "LOST (", "KEPT (", "Alice"} {
			if !strings.Contains(out, w) {
				t.Errorf("diff lacks %q:\n%s", w, out)
			}
		}
	})

	t.Run("show", func(t *testing.T) {
		m := tr.archived[0]
		e := tr.entries[0]
		tests := []struct {
			ref  string
			want []string
		}{
			{fmt.Sprintf("m:%d", m.ID), []string{fmt.Sprintf("message m:%d · %s", m.ID, m.Role), "archived by compaction #", m.Content}},
			{strconv.FormatInt(m.ID, 10), []string{fmt.Sprintf("message m:%d", m.ID)}},
			{fmt.Sprintf("j:%d", e.ID), []string{fmt.Sprintf("journal entry j:%d · %s", e.ID, e.Type), strings.SplitN(e.Content, "\n", 2)[0]}},
		}
		if len(tr.memories) > 0 {
			mem := tr.memories[0]
			tests = append(tests, struct {
				ref  string
				want []string
			}{fmt.Sprintf("mem:%d", mem.ID), []string{fmt.Sprintf("memory mem:%d", mem.ID), mem.Content}})
		}
		for _, tt := range tests {
			out := mustAIHistory(t, "brom", "show", tt.ref, db)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("show %s lacks %q:\n%s", tt.ref, w, out)
				}
			}
		}
	})

	t.Run("as-of", func(t *testing.T) {
		tick := tr.c.State.Tick / 2
		out := mustAIHistory(t, "brom", "as-of", strconv.FormatInt(tick, 10), db)
		if !strings.Contains(out, fmt.Sprintf("brom at the end of tick %d", tick)) || !strings.Contains(out, "% of 2,560 tokens") {
			t.Errorf("as-of table:\n%s", out)
		}
	})

	t.Run("timeline", func(t *testing.T) {
		out := mustAIHistory(t, "brom", "timeline", db)
		for trig, n := range triggers {
			if w := fmt.Sprintf("%c %s ×%d", aihistory.TriggerLetter(trig), trig, n); !strings.Contains(out, w) {
				t.Errorf("chart legend lacks %q:\n%s", w, out)
			}
		}
		marks := ""
		for _, l := range strings.Split(out, "\n") {
			if l := strings.ReplaceAll(l, " ", ""); l != "" && strings.Trim(l, "ESMOC*") == "" {
				marks = l
			}
		}
		if !strings.Contains(marks, "E") || !strings.Contains(marks, "S") {
			t.Errorf("no marker row with E and S:\n%s", out)
		}

		dir := t.TempDir()
		pngPath := filepath.Join(dir, "t.png")
		mustAIHistory(t, "brom", "timeline", "--out", pngPath, "--width", "900", "--height", "400", db)
		f, err := os.Open(pngPath)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("timeline PNG: %v", err)
		}
		if b := img.Bounds(); b.Dx() != 900 || b.Dy() != 400 {
			t.Errorf("PNG is %dx%d, want 900x400", b.Dx(), b.Dy())
		}

		svgPath := filepath.Join(dir, "t.svg")
		mustAIHistory(t, "brom", "timeline", "--out", svgPath, db)
		raw, err := os.ReadFile(svgPath)
		if err != nil {
			t.Fatal(err)
		}
		byTrigger := svgMarkers(t, raw)
		if diff := cmp.Diff(triggers, byTrigger); diff != "" {
			t.Errorf("SVG markers by trigger (-compactions +markers):\n%s", diff)
		}
		if _, err := runAIHistoryCmd(t, "brom", "timeline", "--out", filepath.Join(dir, "t.jpg"), db); err == nil {
			t.Errorf("--out t.jpg: no error")
		}
	})

	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			args []string
			want string
		}{
			{[]string{"brom", "gossip", db}, `unknown view "gossip"`},
			{[]string{"brom", "journal", "--archived", db}, "--archived does not apply to this view (it applies to history)"},
			{[]string{"brom", "history", "--archived", "--all", db}, "exclude each other"},
			{[]string{"brom", "diff", db}, "needs ID"},
			{[]string{"brom", "diff", "x", db}, "must be a positive integer"},
			{[]string{"brom", "overview", "extra", db}, "takes no arguments"},
			{[]string{"brom", "show", "q:4", db}, "is not a reference"},
			{[]string{"brom", "show", "m:999999", db}, `message 999999 of npc "brom" does not exist`},
			{[]string{"mira", db}, `npc "mira" does not exist`},
			{[]string{"brom", "--db", filepath.Join(t.TempDir(), "none.db")}, "no database at"},
		}
		for _, tt := range tests {
			_, err := runAIHistoryCmd(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("aihistory %v = %v, want an error with %q", tt.args, err, tt.want)
			}
		}
	})

	t.Run("a daemon answers as the file does", func(t *testing.T) {
		dir := t.TempDir()
		copyFile(t, path, filepath.Join(dir, "npcd.db"))
		url, stop := serveFile(t, dir)
		defer stop()
		server := "--server=" + url
		for _, view := range [][]string{{"history", "--archived", "--limit", "20"}, {"compactions"}, {"diff", "1"}, {"journal"}, {"as-of", "10"}, {"timeline"}, {"memory", "ruby"}} {
			viaFile := mustAIHistory(t, append([]string{"brom"}, append(view, db)...)...)
			viaDaemon := mustAIHistory(t, append([]string{"brom"}, append(view, server)...)...)
			// Footers repeat the flags given, which differ.
			viaFile = strings.ReplaceAll(viaFile, " --db "+path, "")
			viaDaemon = strings.ReplaceAll(viaDaemon, " --server "+url, "")
			if diff := cmp.Diff(viaFile, viaDaemon); diff != "" {
				t.Errorf("%v (-file +daemon):\n%s", view, diff)
			}
		}
		var o api.Overview
		decodeOutput(t, mustAIHistory(t, "brom", server, "--json"), &o)
		if !o.Sleep.Known || o.Sleep.NextRun == nil {
			t.Errorf("the daemon does not tell the next sleep: %+v", o.Sleep)
		}
	})
}

// TestAIHistoryAsOfMatchesTheRun checks as-of against the live history the
// engine left after every tick of a run with look observations posted
// between ticks, emergency compactions and compacting sleeps.
func TestAIHistoryAsOfMatchesTheRun(t *testing.T) {
	r := produceRun(t, t.TempDir(), runOptions{turns: 40, window: 3072, sleepEvery: 15, lookBytes: 600})
	triggers := map[string]int{}
	for _, rec := range readTruth(t, r.db, r.npc).records {
		triggers[rec.Trigger]++
	}
	if triggers[sleep.TriggerEmergency] == 0 || triggers[sleep.TriggerSleep] == 0 {
		t.Fatalf("the run compacted %v; the test needs emergency and sleep compactions", triggers)
	}
	ctx := context.Background()
	// The client aihistory --db uses: the API in-process over the file.
	tg := &target{db: r.db}
	client, done, err := tg.inspection(ctx, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	for tick, want := range r.live {
		a, err := client.AsOf(ctx, r.npc, tick)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		if a.Summary != nil {
			got = append(got, a.Summary.ID)
		}
		for _, m := range a.Messages {
			got = append(got, m.ID)
		}
		if diff := cmp.Diff(sortedIDs(want), sortedIDs(got)); diff != "" {
			t.Errorf("as-of %d (-live then +reconstructed):\n%s", tick, diff)
		}
	}
}

// rowIDs returns the ids with prefix (m:, j:) that start table rows.
func rowIDs(out, prefix string) []int64 {
	var ids []int64
	for _, l := range strings.Split(out, "\n") {
		cell, ok := strings.CutPrefix(l, "│ "+prefix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.Fields(cell)[0], 10, 64)
		if err == nil {
			ids = append(ids, n)
		}
	}
	return ids
}

// svgMarkers parses an SVG strictly and counts the compaction markers by
// trigger.
func svgMarkers(t *testing.T, raw []byte) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(raw))
	dec.Strict = true
	counts := map[string]int{}
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = se.Name.Local
		}
		for _, a := range se.Attr {
			if a.Name.Local != "class" {
				continue
			}
			fields := strings.Fields(a.Value)
			if len(fields) == 2 && fields[0] == "marker" {
				counts[strings.TrimPrefix(fields[1], "marker-")]++
			}
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	return counts
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func round3(f float64) float64 { return float64(int(f*1000+0.5)) / 1000 }

// serveFile runs the daemon on dir/npcd.db on a free port and returns its
// URL and a function that stops it and waits for a clean shutdown.
func serveFile(t *testing.T, dir string) (string, func()) {
	t.Helper()
	cfg := defaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DB = filepath.Join(dir, "npcd.db")
	cfg.LogLevel = "error"
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, io.Discard, ready) }()
	select {
	case addr := <-ready:
		return "http://" + addr, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("shutdown: %v", err)
			}
		}
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	}
	return "", nil
}

// TestAIHistoryReadsWhileADaemonWrites opens the file read-only while
// another connection holds a write transaction on it: the reader is not
// blocked, sees what was committed, and cannot write.
func TestAIHistoryReadsWhileADaemonWrites(t *testing.T) {
	path := scenarioDB(t, "blacksmith.yaml", t.TempDir())
	ctx := context.Background()
	db, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	chars := character.NewStore(db)
	tx := db.Begin()
	if tx.Error != nil {
		t.Fatal(tx.Error)
	}
	m := &character.Message{Role: "user", Content: "[2026-11-21 10:00] alice says: \"Uncommitted words.\"", Turn: 99, Tick: 99}
	if err := chars.WithTx(tx).AppendMessages(ctx, "brom", []*character.Message{m}, llm.NewCounter("builtin"), 0); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	out, err := runAIHistoryCmd(t, "brom", "history", "--db", path)
	if err != nil {
		tx.Rollback()
		t.Fatalf("history while a write transaction is open: %v", err)
	}
	if strings.Contains(out, "Uncommitted words") {
		t.Errorf("the reader saw an uncommitted message:\n%s", out)
	}
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if out := mustAIHistory(t, "brom", "history", "--db", path); !strings.Contains(out, "Uncommitted words") {
		t.Errorf("the reader does not see the committed message:\n%s", out)
	}

	cfg := defaultConfig()
	cfg.DB = path
	a, err := openApp(ctx, cfg, zerolog.Nop(), appOptions{readOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close(context.Background())
	if err := a.chars.UpdateState(ctx, "brom", map[string]any{"tick": 1000}); err == nil {
		t.Errorf("a write through the read-only app succeeded")
	}
}
