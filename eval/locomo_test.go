package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/npcd/npcd/tick"
)

const (
	fixtureEvents    = "testdata/events.jsonl"
	fixtureQuestions = "testdata/questions.jsonl"
)

// The fixture's questions are built so that their recall is known:
//   - single-hop, temporal and open-domain questions name a word only their
//     evidence turn holds, so it ranks first (recall 1 at k=1);
//   - the multi-hop question has two evidence turns, one per half of the
//     question: one is first, the other second (0.5 at k=1, 1 at k=2);
//   - the adversarial question asks about Bo's cat, which does not exist;
//     its evidence (Ann's kitten knocking a mug over) shares no word with
//     it, while Bo's own turns share his name; the evidence sits between
//     two of them and joins one as a window part once two results are
//     asked for (0 at k=1, 1 at k=2);
//   - one question has no evidence and is skipped.
func TestLoCoMoOnFixture(t *testing.T) {
	var mu sync.Mutex
	var configured []string
	var sessions []string
	var progress bytes.Buffer
	rep, err := LoCoMo(context.Background(), Options{
		Events: fixtureEvents, Questions: fixtureQuestions, Ks: []int{2, 1, 2}, Dir: t.TempDir(),
		Progress: &progress, Baseline: true,
		Configure: func(ctx context.Context, db *gorm.DB, deps *tick.Deps) error {
			mu.Lock()
			defer mu.Unlock()
			configured = append(configured, "configured")
			return nil
		},
		AfterSession: func(ctx context.Context, eng *tick.Engine, npc string, session int) error {
			sessions = append(sessions, npc+"/"+string(rune('0'+session)))
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	type fig struct {
		Questions int
		R1, R2    float64
	}
	got := map[string]fig{"headline": {rep.Headline.Questions, rep.Headline.Recall[1], rep.Headline.Recall[2]}}
	for c, s := range rep.Categories {
		got[c] = fig{s.Questions, s.Recall[1], s.Recall[2]}
	}
	want := map[string]fig{
		"1":        {1, 0.5, 1},
		"2":        {2, 1, 1},
		"3":        {1, 1, 1},
		"4":        {2, 1, 1},
		"5":        {1, 1, 1},
		"headline": {6, 5.5 / 6, 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("recall (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 2}, rep.Ks); diff != "" {
		t.Fatalf("ks sorted and unique (-want +got):\n%s", diff)
	}
	if rep.Skipped != 1 {
		t.Fatalf("skipped %d, want 1", rep.Skipped)
	}
	var turns []int
	for _, c := range rep.Conversations {
		turns = append(turns, c.Turns, c.Questions)
	}
	if diff := cmp.Diff([]int{6, 5, 3, 2}, turns); diff != "" {
		t.Fatalf("turns and questions per conversation (-want +got):\n%s", diff)
	}
	if rep.Headline.TokensPerQuery <= 0 || rep.Baseline == nil || rep.Baseline.Headline.Questions != 6 || !rep.Headline.Budgeted {
		t.Fatalf("tokens %v, baseline %+v", rep.Headline.TokensPerQuery, rep.Baseline)
	}
	if diff := cmp.Diff([]string{"configured", "configured"}, configured); diff != "" {
		t.Fatalf("Configure calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"c1/1", "c1/2", "c2/1"}, sessions); diff != "" {
		t.Fatalf("AfterSession calls (-want +got):\n%s", diff)
	}
	if !strings.Contains(progress.String(), "c2 questions") {
		t.Fatalf("no progress shown: %q", progress.String())
	}

	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var shape struct {
		Headline   map[string]float64         `json:"headline"`
		Categories map[string]map[string]any  `json:"categories"`
		Baseline   map[string]json.RawMessage `json:"baseline"`
	}
	if err := json.Unmarshal(b, &shape); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"recall@1", "recall@2", "tokens_per_query", "questions", "recall@budget"} {
		if _, ok := shape.Headline[key]; !ok {
			t.Errorf("headline lacks %q: %s", key, b)
		}
	}
	if shape.Headline["recall@1"] != 0.9167 || shape.Categories["1"]["name"] != "multi-hop" || len(shape.Categories) != 5 ||
		len(shape.Baseline["headline"]) == 0 || len(shape.Baseline["categories"]) == 0 {
		t.Errorf("json: %s", b)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, s := range []string{"headline (1–4)", "recall@2", "1 multi-hop", "0.917", "bm25 r@2"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
}

func TestLoCoMoRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"conv\": \"c1\"}\n{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badCat := filepath.Join(dir, "cat.jsonl")
	if err := os.WriteFile(badCat, []byte(`{"conv": "c1", "qid": "q", "question": "x?", "evidence": ["D1:1"], "category": 9}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
	}{
		{"no files", Options{}},
		{"k of 0", Options{Events: fixtureEvents, Questions: fixtureQuestions, Ks: []int{0}}},
		{"k above the maximum", Options{Events: fixtureEvents, Questions: fixtureQuestions, Ks: []int{1000}}},
		{"window too small", Options{Events: fixtureEvents, Questions: fixtureQuestions, Window: 100}},
		{"unknown conversation", Options{Events: fixtureEvents, Questions: fixtureQuestions, Conversations: []string{"c9"}}},
		{"malformed events", Options{Events: bad, Questions: fixtureQuestions}},
		{"unknown category", Options{Events: fixtureEvents, Questions: badCat}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := LoCoMo(context.Background(), tc.opts); !errors.Is(err, ErrInput) {
				t.Fatalf("got %v, want ErrInput", err)
			}
		})
	}
	if _, err := LoCoMo(context.Background(), Options{Events: filepath.Join(dir, "missing"), Questions: fixtureQuestions}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestLoCoMoOneConversation(t *testing.T) {
	rep, err := LoCoMo(context.Background(), Options{Events: fixtureEvents, Questions: fixtureQuestions, Conversations: []string{"c2"}, Ks: []int{1}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Conversations) != 1 || rep.Conversations[0].Conversation != "c2" || rep.Headline.Questions != 2 || rep.Headline.Recall[1] != 1 {
		t.Fatalf("report %+v", rep)
	}
	if rep.Baseline != nil || rep.Headline.Budgeted {
		t.Fatalf("baseline scored without being asked for")
	}
}
