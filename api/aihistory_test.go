package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/sleep"
)

// fakeSchedule is a scheduler that knows one NPC's next sleep.
type fakeSchedule struct {
	npc string
	at  time.Time
}

func (f fakeSchedule) NextRun(id string) (time.Time, bool) { return f.at, id == f.npc }

// inspectedRun is brom after a run with emergency and manual compactions,
// and the live history after each tick.
type inspectedRun struct {
	e    *env
	live map[int64][]int64
	last int64
}

func newInspectedRun(t *testing.T, o envOpts) *inspectedRun {
	t.Helper()
	o.realCompactor = true
	e := newEnv(t, o)
	ctx := context.Background()
	s := bromSettings()
	s.ContextWindow = 2048
	s.MaxOutputTokens = 256 // the default 512 leaves no room for a turn in 2,048 tokens
	e.put("brom", s)
	r := &inspectedRun{e: e, live: map[int64][]int64{}}
	for i := 0; i < 24; i++ {
		e.say("brom", fmt.Sprintf("evt-%d", i), fmt.Sprintf("Tobias from Westmarch owes me %d gold, and the wolves of the north road took %d sheep.", 10+i, 3+i))
		res, err := e.client.Tick(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		live, err := e.chars.LiveMessages(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range live {
			r.live[res.Tick] = append(r.live[res.Tick], m.ID)
		}
		r.last = res.Tick
		if i%8 == 7 {
			if _, err := e.client.Compact(ctx, "brom", ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}

// keys returns the sorted keys of a JSON object.
func keys(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s is not a JSON object: %v", raw, err)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestInspection checks the inspection routes over one run.
func TestInspection(t *testing.T) {
	t.Parallel()
	r := newInspectedRun(t, envOpts{})
	t.Run("routes", func(t *testing.T) { testInspectionRoutes(t, r) })
	t.Run("as-of matches the live history of each tick", func(t *testing.T) { testAsOf(t, r) })
	t.Run("memory explains its results", func(t *testing.T) { testMemory(t, r) })
	t.Run("overview of a compacted npc", func(t *testing.T) { testOverview(t, r) })
	t.Run("history pages cover every message once", func(t *testing.T) { testHistoryPages(t, r) })
}

func testInspectionRoutes(t *testing.T, r *inspectedRun) {
	e := r.e
	ctx := context.Background()
	rs, err := e.client.Compactions(ctx, "brom")
	if err != nil || len(rs) < 3 {
		t.Fatalf("compactions %v, %v: want at least three", rs, err)
	}
	live, err := e.client.History(ctx, "brom", HistoryQuery{State: "live", Limit: 1})
	if err != nil || len(live) != 1 {
		t.Fatalf("live history %v, %v", live, err)
	}
	entries, err := e.client.Journal(ctx, "brom", JournalQuery{Limit: 1})
	if err != nil || len(entries) != 1 {
		t.Fatalf("journal %v, %v", entries, err)
	}
	comp := rs[len(rs)-1].ID
	tests := []struct {
		path   string
		status int
		keys   []string // the top-level fields of a 200 body
		field  string   // the parameter a 400 names
	}{
		{path: "/v1/npcs/brom/overview", status: 200, keys: jsonFields(reflect.TypeOf(Overview{}))},
		{path: "/v1/npcs/brom/history?state=live&turn=3", status: 200, keys: []string{"compactions", "messages", "next_before"}},
		{path: "/v1/npcs/brom/journal?limit=2", status: 200, keys: []string{"entries", "next_before"}},
		{path: "/v1/npcs/brom/compactions?limit=1", status: 200, keys: []string{"compactions", "next_before"}},
		{path: "/v1/npcs/brom/memory?q=Tobias+gold&k=3", status: 200, keys: []string{"results"}},
		{path: fmt.Sprintf("/v1/npcs/brom/messages/%d", live[0].ID), status: 200, keys: []string{"archived_by", "message"}},
		{path: fmt.Sprintf("/v1/npcs/brom/journal/%d", entries[0].ID), status: 200, keys: []string{"entry"}},
		{path: fmt.Sprintf("/v1/npcs/brom/compactions/%d/diff", comp), status: 200, keys: jsonFields(reflect.TypeOf(DiffResponse{}))},
		{path: "/v1/npcs/brom/as-of?tick=2", status: 200, keys: jsonFields(reflect.TypeOf(AsOfResponse{}))},
		{path: "/v1/npcs/brom/timeline?from=2&to=20", status: 200, keys: jsonFields(reflect.TypeOf(TimelineResponse{}))},

		{path: "/v1/npcs/brom/memory", status: 400, field: "q"},
		{path: "/v1/npcs/brom/memory?q=%20", status: 400, field: "q"},
		{path: "/v1/npcs/brom/memory?q=" + strings.Repeat("a", MaxQueryBytes+1), status: 400, field: "q"},
		{path: "/v1/npcs/brom/memory?q=sword&k=0", status: 400, field: "k"},
		{path: "/v1/npcs/brom/memory?q=sword&k=101", status: 400, field: "k"},
		{path: "/v1/npcs/brom/memory?q=sword&kk=1", status: 400, field: "kk"},
		{path: "/v1/npcs/brom/history?turn=zero", status: 400, field: "turn"},
		{path: "/v1/npcs/brom/compactions?limit=0", status: 400, field: "limit"},
		{path: "/v1/npcs/brom/messages/abc", status: 400, field: "id"},
		{path: "/v1/npcs/brom/journal/0", status: 400, field: "id"},
		{path: "/v1/npcs/brom/compactions/-1/diff", status: 400, field: "id"},
		{path: "/v1/npcs/brom/as-of", status: 400, field: "tick"},
		{path: "/v1/npcs/brom/as-of?tick=x", status: 400, field: "tick"},
		{path: "/v1/npcs/brom/timeline?from=5&to=2", status: 400, field: "to"},
		{path: "/v1/npcs/brom/timeline?limit=100001", status: 400, field: "limit"},
		{path: "/v1/npcs/brom/overview?x=1", status: 400, field: "x"},
		{path: "/v1/npcs/Brom!/overview", status: 400, field: "npc"},

		{path: "/v1/npcs/mira/overview", status: 404},
		{path: "/v1/npcs/mira/memory?q=sword", status: 404},
		{path: "/v1/npcs/mira/messages/1", status: 404},
		{path: "/v1/npcs/mira/as-of?tick=1", status: 404},
		{path: "/v1/npcs/mira/timeline", status: 404},
		{path: "/v1/npcs/brom/messages/999999", status: 404},
		{path: "/v1/npcs/brom/journal/999999", status: 404},
		{path: "/v1/npcs/brom/memories/999999", status: 404},
		{path: "/v1/npcs/brom/compactions/999999/diff", status: 404},
		{path: fmt.Sprintf("/v1/npcs/brom/as-of?tick=%d", r.last+1), status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got := e.do("GET", tt.path, "")
			if got.status != tt.status {
				t.Fatalf("status %d, want %d: %s", got.status, tt.status, got.body)
			}
			switch tt.status {
			case http.StatusOK:
				if diff := cmp.Diff(tt.keys, keys(t, got.body)); diff != "" {
					t.Errorf("fields (-want +got):\n%s", diff)
				}
			case http.StatusBadRequest:
				var d ErrorDetail
				if tt.field == "tick" {
					// errorOf takes "tick:" for a leaked error of package
					// tick; here it is the parameter.
					var body ErrorBody
					if err := json.Unmarshal(got.body, &body); err != nil {
						t.Fatal(err)
					}
					d = body.Error
				} else {
					d = errorOf(t, got)
				}
				if d.Code != CodeBadRequest || !strings.HasPrefix(d.Message, tt.field+":") {
					t.Errorf("error %+v does not name %q", d, tt.field)
				}
			case http.StatusNotFound:
				d := errorOf(t, got)
				if d.Code != CodeNotFound || !strings.Contains(d.Message, "does not exist") {
					t.Errorf("error %+v, want not_found saying what does not exist", d)
				}
				if strings.Contains(tt.path, "/brom/") && strings.HasPrefix(d.Message, "npc") {
					t.Errorf("message %q blames the npc for a missing item", d.Message)
				}
			}
		})
	}
}

func testAsOf(t *testing.T, r *inspectedRun) {
	ctx := context.Background()
	for tick, want := range r.live {
		a, err := r.e.client.AsOf(ctx, "brom", tick)
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
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("as-of tick %d (-live then +reconstructed):\n%s", tick, diff)
		}
		if a.Record == nil || a.Record.Tick != tick || a.Boundary == 0 {
			t.Errorf("as-of tick %d: record %+v, boundary %d", tick, a.Record, a.Boundary)
		}
	}
}

func testMemory(t *testing.T, r *inspectedRun) {
	res, err := r.e.client.Memory(context.Background(), "brom", "Tobias Westmarch gold", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 || len(res) > 3 {
		t.Fatalf("%d results, want 1 to 3", len(res))
	}
	for i, m := range res {
		if m.ID == 0 || m.Kind == "" || !strings.HasSuffix(m.Ref, fmt.Sprintf(":%d", m.ID)) || m.Score <= 0 || len(m.ScoreParts) == 0 {
			t.Errorf("result %d = %+v lacks an id, kind, ref, score or score parts", i, m)
		}
		if i > 0 && m.Score > res[i-1].Score {
			t.Errorf("result %d scores %v above result %d's %v", i, m.Score, i-1, res[i-1].Score)
		}
	}
	raw := r.e.do("GET", "/v1/npcs/brom/memory?q=Tobias", "")
	var body struct {
		Results []struct {
			Sources map[string]json.RawMessage `json:"sources"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw.body, &body); err != nil || len(body.Results) == 0 {
		t.Fatalf("body %s: %v", raw.body, err)
	}
	for _, k := range []string{"journal_ids", "message_ids", "event_refs"} {
		if v := body.Results[0].Sources[k]; len(v) == 0 || v[0] != '[' {
			t.Errorf("sources.%s = %s, want an array", k, v)
		}
	}
}

func TestOverviewSaysWhenTheNextSleepIsKnown(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		sleeps    SleepSchedule
		npc       string
		wantKnown bool
		wantNext  *time.Time
	}{
		{"no scheduler", nil, "brom", false, nil},
		{"scheduled", fakeSchedule{npc: "brom", at: at}, "brom", true, &at},
		{"not scheduled", fakeSchedule{npc: "mira", at: at}, "brom", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOpts{sleeps: tt.sleeps})
			e.put("brom", bromSettings())
			o, err := e.client.Overview(context.Background(), "brom")
			if err != nil {
				t.Fatal(err)
			}
			if o.Sleep.Known != tt.wantKnown || !cmp.Equal(o.Sleep.NextRun, tt.wantNext) {
				t.Errorf("sleep = %+v, want known %v, next %v", o.Sleep, tt.wantKnown, tt.wantNext)
			}
			if o.Summary != nil || o.Context.Window != character.DefaultContextWindow || o.Warnings == nil || o.Awaiting == nil {
				t.Errorf("fresh overview = %+v, want no summary, the default window, empty lists", o)
			}
		})
	}
}

func testOverview(t *testing.T, r *inspectedRun) {
	o, err := r.e.client.Overview(context.Background(), "brom")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := r.e.client.Compactions(context.Background(), "brom")
	if err != nil {
		t.Fatal(err)
	}
	byTrigger := map[string]int{}
	for _, rec := range rs {
		byTrigger[rec.Trigger]++
	}
	if diff := cmp.Diff(byTrigger, o.CompactionsByTrigger); diff != "" {
		t.Errorf("compactions by trigger (-records +overview):\n%s", diff)
	}
	if o.Summary == nil || !o.Summary.Summary || o.LastCompaction == nil || o.Summary.ID != o.LastCompaction.SummaryMessageID {
		t.Errorf("summary %+v, last compaction %+v: want the live summary the last compaction wrote", o.Summary, o.LastCompaction)
	}
	if len(rs) >= 3 && len(o.Warnings) == 0 {
		t.Errorf("no warning after %d compactions", len(rs))
	}
	if o.Tick != r.last || o.Context.Compactions != len(rs) || o.Knowledge.JournalByType["context_synthesis"] != len(rs) {
		t.Errorf("overview %+v, want tick %d and %d compactions and synthesis entries", o, r.last, len(rs))
	}
}

func testHistoryPages(t *testing.T, r *inspectedRun) {
	ctx := context.Background()
	all, err := r.e.client.History(ctx, "brom", HistoryQuery{Limit: MaxPageLimit})
	if err != nil {
		t.Fatal(err)
	}
	var paged []int64
	var before int64
	pages := 0
	for {
		page, err := r.e.client.HistoryPage(ctx, "brom", HistoryQuery{Limit: 7, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		ids := make([]int64, len(page.Messages))
		for i, m := range page.Messages {
			ids[i] = m.ID
			if m.CompactionID != nil && !hasCompaction(page.Compactions, *m.CompactionID) {
				t.Errorf("page lacks compaction %d of m:%d", *m.CompactionID, m.ID)
			}
		}
		paged = append(ids, paged...)
		if page.NextBefore == nil {
			break
		}
		if *page.NextBefore != ids[0] {
			t.Fatalf("next_before %d, want the oldest id of the page %d", *page.NextBefore, ids[0])
		}
		before = *page.NextBefore
	}
	want := make([]int64, len(all))
	for i, m := range all {
		want[i] = m.ID
	}
	if diff := cmp.Diff(want, paged); diff != "" {
		t.Errorf("pages of 7 (-one page +paged):\n%s", diff)
	}
	if wantPages := (len(all) + 6) / 7; pages != wantPages {
		t.Errorf("%d pages for %d messages, want %d", pages, len(all), wantPages)
	}
}

func hasCompaction(rs []sleep.Record, id int64) bool {
	for _, r := range rs {
		if r.ID == id {
			return true
		}
	}
	return false
}
