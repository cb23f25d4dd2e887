package journal

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

func contents(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Content
	}
	return out
}

// plain ranks by relevance alone, without the semantic channel, feedback, the
// neighbour bonus, recency or importance, and returns every row as a result of its own, so each test
// isolates one part of the score.
func plain(w ...Option) []Option {
	return append([]Option{WithSemantic(0), WithNeighbours(0), WithRecency(0, 0), WithWindow(0, 1, 0), WithFeedback(0)}, w...)
}

func TestRankingChannels(t *testing.T) {
	texts := []string{
		"Alice lost her sword at the forge.",
		"The forge fire burns hot tonight.",
		"Bob sells fresh bread at the market.",
		"Alice misplaced several swords yesterday.",
	}
	tests := []struct {
		name    string
		opts    []Option
		query   string
		want    []string
		keyword bool // results must have a keyword part
		vector  bool // results must have a vector part
	}{
		{
			name:  "keyword only ranks by BM25 and finds only matching rows",
			opts:  plain(WithWeights(0, 1)),
			query: "sword forge",
			// porter stemming makes "swords" match "sword".
			want:    []string{texts[0], texts[3], texts[1]},
			keyword: true,
		},
		{
			name:  "vector only finds a typo that no keyword matches",
			opts:  plain(WithWeights(1, 0)),
			query: "swordz",
			want:  []string{texts[0], texts[3]},
			// the trigrams <sw, swo, wor, ord of "swordz" are shared with
			// "sword" and "swords"; nothing else shares any.
			vector: true,
		},
		{
			name:    "hybrid puts the row both channels like first",
			opts:    plain(),
			query:   "lost sword",
			want:    []string{texts[0], texts[3]},
			keyword: true,
			vector:  true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.npc(t, "brom", t0)
			e.say(t, "brom", t0, texts, []string{"e1", "e2", "e3", "e4"})
			r := e.retriever(t, tc.opts...)
			rs, err := r.Search(context.Background(), "brom", tc.query, 3)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, contents(rs)); diff != "" {
				t.Fatalf("results (-want +got):\n%s", diff)
			}
			for i, res := range rs {
				if got := res.Parts[PartKeyword] > 0; tc.keyword && i == 0 && !got {
					t.Errorf("%q: want a keyword part, got %v", res.Content, res.Parts)
				}
				if !tc.keyword && res.Parts[PartKeyword] != 0 {
					t.Errorf("%q: want no keyword part, got %v", res.Content, res.Parts)
				}
				if got := res.Parts[PartVector] > 0; tc.vector && !got {
					t.Errorf("%q: want a vector part, got %v", res.Content, res.Parts)
				}
			}
		})
	}
}

// Two memories that differ only in a stop word are equally relevant to any
// query, so recency or importance alone must order them.
func TestRecencyAndImportance(t *testing.T) {
	tests := []struct {
		name       string
		opts       []Option
		a, b       Memory // a must rank first
		recA, recB float64
		impA, impB float64
	}{
		{
			name: "newer first, halved every 30 days",
			opts: []Option{WithNeighbours(0), WithRecency(0.5, 0)},
			a:    Memory{Content: "Alice lost her sword at the forge", GameTime: t0, Importance: 5},
			b:    Memory{Content: "Alice lost her sword in the forge", GameTime: t0.Add(-60 * 24 * time.Hour), Importance: 5},
			recA: 1, recB: 0.25, impA: 0.5, impB: 0.5,
		},
		{
			name: "the decay follows the half-life option",
			opts: []Option{WithNeighbours(0), WithRecency(0.5, 0), WithHalfLife(24 * time.Hour)},
			a:    Memory{Content: "Alice lost her sword at the forge", GameTime: t0.Add(-24 * time.Hour), Importance: 5},
			b:    Memory{Content: "Alice lost her sword in the forge", GameTime: t0.Add(-72 * time.Hour), Importance: 5},
			recA: 0.5, recB: 0.125, impA: 0.5, impB: 0.5,
		},
		{
			name: "more important first",
			opts: []Option{WithNeighbours(0), WithRecency(0, 0.5)},
			a:    Memory{Content: "Alice lost her sword in the forge", GameTime: t0, Importance: 9},
			b:    Memory{Content: "Alice lost her sword at the forge", GameTime: t0, Importance: 2},
			recA: 1, recB: 1, impA: 0.9, impB: 0.2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.npc(t, "brom", t0)
			ctx := context.Background()
			a, b := tc.a, tc.b
			for _, m := range []*Memory{&b, &a} {
				if _, err := e.jour.AddMemory(ctx, "brom", m); err != nil {
					t.Fatal(err)
				}
			}
			rs, err := e.retriever(t, tc.opts...).Search(ctx, "brom", "where is the lost sword", 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 2 || rs[0].ID != a.ID || rs[1].ID != b.ID {
				t.Fatalf("want memory %d then %d, got %+v", a.ID, b.ID, rs)
			}
			if rs[0].Parts[PartRelevance] != rs[1].Parts[PartRelevance] {
				t.Fatalf("relevance differs: %v vs %v", rs[0].Parts, rs[1].Parts)
			}
			got := []float64{rs[0].Parts[PartRecency], rs[1].Parts[PartRecency], rs[0].Parts[PartImportance], rs[1].Parts[PartImportance]}
			want := []float64{tc.recA, tc.recB, tc.impA, tc.impB}
			if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y float64) bool { return math.Abs(x-y) < 1e-9 })); diff != "" {
				t.Fatalf("recency a, b, importance a, b (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSupersededNeverOutranksReplacement(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	ctx := context.Background()
	// Three revisions of one belief; the oldest words match some queries
	// far better than the current one does.
	v1 := &Memory{Content: "Alice keeps her silver sword at the forge by the anvil", Entity: "alice", Key: "sword", Importance: 8, GameTime: t0.Add(-48 * time.Hour)}
	v2 := &Memory{Content: "Alice sold her sword", Entity: "alice", Key: "sword", Importance: 3, GameTime: t0.Add(-24 * time.Hour)}
	v3 := &Memory{Content: "Alice bought the sword back from Bob", Importance: 2, GameTime: t0}
	if _, err := e.jour.AddMemory(ctx, "brom", v1); err != nil {
		t.Fatal(err)
	}
	sup, err := e.jour.AddMemory(ctx, "brom", v2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{v1.ID}, sup); diff != "" {
		t.Fatalf("superseded by key (-want +got):\n%s", diff)
	}
	if err := e.jour.Supersede(ctx, "brom", v2.ID, v3); err != nil {
		t.Fatal(err)
	}
	e.say(t, "brom", t0, []string{"Greta says the anvil at the forge is cracked"}, nil)
	order := map[int64]int{v1.ID: 1, v2.ID: 2, v3.ID: 3}
	tests := []struct {
		query string
		found bool // some revision must be found (else it may be)
	}{
		{"silver sword at the forge by the anvil", true},
		{"Alice sold her sword", true},
		{"sword", true},
		{"who has the sword now", true},
		// Only the first revision matches well: it may be left out, never
		// put above the others.
		{"forge anvil", false},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			rs, err := e.retriever(t).Search(ctx, "brom", tc.query, 10)
			if err != nil {
				t.Fatal(err)
			}
			seen := 0 // the newest revision seen so far
			for _, r := range rs {
				if r.Kind != KindMemory {
					continue
				}
				v := order[r.ID]
				if seen != 0 && v > seen {
					t.Fatalf("revision %d ranks below revision %d: %v", v, seen, contents(rs))
				}
				if seen == 0 && v != 3 {
					t.Fatalf("revision %d ranks above the current one: %v", v, contents(rs))
				}
				seen = v
				if sup := r.Parts[PartSuperseded] == 1; sup != (v != 3) {
					t.Errorf("revision %d: superseded part %v", v, r.Parts)
				}
			}
			if tc.found && seen == 0 {
				t.Fatalf("no memory found: %v", contents(rs))
			}
		})
	}
}

// Terms keeps only words: no character of a query reaches a search as
// syntax, and stop words and lone letters are dropped.
func TestTermsKeepOnlyWords(t *testing.T) {
	tests := []struct {
		query string
		want  []string
	}{
		{`sword forge`, []string{"sword", "forge"}},
		{`"sword" OR "*"`, []string{"sword"}},
		{`NEAR(sword forge, 2)`, []string{"near", "sword", "forge"}},
		{`sword* AND ^forge NOT content:secret`, []string{"sword", "forge", "content", "secret"}},
		{`'; DROP TABLE messages; --`, []string{"drop", "table", "messages"}},
		{`Café CRÈME`, []string{"café", "crème"}},
		// A lone kana is dropped like any one-letter word; a lone
		// ideograph is a word.
		{`東京 へ 行く 木`, []string{"東京", "行く", "木"}},
		{`the and of`, nil},
		{`"" * ( ) : ^`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			if got := Terms(tc.query); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHostileQueriesSearchSafely(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	texts := []string{
		"Alice lost her sword at the forge.",
		"Le café est fermé ce soir.",
		"東京 は 大きい 街 です",
		"The near gate is locked.",
	}
	e.say(t, "brom", t0, texts, nil)
	r := e.retriever(t, plain(WithWeights(0, 1))...)
	tests := []struct {
		query string
		want  []string // first results, in order; nil for none
	}{
		{`"sword" OR "*"`, []string{texts[0]}},
		{`sword*`, []string{texts[0]}},
		{`NEAR(sword forge)`, []string{texts[0], texts[3]}},
		{`content:sword`, []string{texts[0]}},
		{`^forge`, []string{texts[0]}},
		{`CAFE`, []string{texts[1]}}, // diacritics removed on both sides
		{`東京`, []string{texts[2]}},
		{`'; DROP TABLE messages; --`, nil},
		{`AND OR NOT`, nil},
		{``, nil},
		{`   ?!  `, nil},
		{`the and of`, nil},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			for name, search := range map[string]func(context.Context, string, string, int) ([]Result, error){
				"retriever": r.Search, "store": e.jour.Search,
			} {
				rs, err := search(ctx, "brom", tc.query, 2)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if diff := cmp.Diff(tc.want, contents(rs), cmp.Comparer(func(a, b []string) bool {
					return len(a) == len(b) && (len(a) == 0 || cmp.Equal(a, b))
				})); diff != "" {
					t.Fatalf("%s (-want +got):\n%s", name, diff)
				}
			}
		})
	}
	var n int64
	if err := e.db.Model(&character.Message{}).Count(&n).Error; err != nil || n != int64(len(texts)) {
		t.Fatalf("messages after the searches: %d, %v", n, err)
	}
}

func TestArchivedMessagesAreFound(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	ctx := context.Background()
	ids := e.say(t, "brom", t0.Add(-90*24*time.Hour), []string{"Alice says: I lost my sword at the forge."}, []string{"evt-1"})
	r := e.retriever(t)
	// Three compactions, each archiving everything live before it, with
	// searches in between so the index is built before the rows move.
	for c := int64(1); c <= 3; c++ {
		more := e.say(t, "brom", t0.Add(time.Duration(c)*time.Hour), []string{"Bob says: nice weather", "Carol says: the well is dry"}, nil)
		if _, err := r.Search(ctx, "brom", "weather", 1); err != nil {
			t.Fatal(err)
		}
		live, err := e.chars.History(ctx, "brom", character.HistoryQuery{State: character.StateLive})
		if err != nil {
			t.Fatal(err)
		}
		var archive []int64
		for _, m := range live {
			if m.ID <= more[0] {
				archive = append(archive, m.ID)
			}
		}
		if err := e.chars.Archive(ctx, "brom", archive, &c); err != nil {
			t.Fatal(err)
		}
	}
	m, err := e.chars.MessageByID(ctx, "brom", ids[0])
	if err != nil || m.State != character.StateArchived {
		t.Fatalf("message state %v, %v", m, err)
	}
	for name, r := range map[string]*Retriever{"warm index": r, "cold index": e.retriever(t)} {
		rs, err := r.Search(ctx, "brom", "where did Alice lose her sword?", 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 || rs[0].ID != ids[0] || rs[0].Kind != KindMessage {
			t.Fatalf("%s: want archived message %d first, got %+v", name, ids[0], rs)
		}
	}
}

func TestResultSources(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	ctx := context.Background()
	msg := e.say(t, "brom", t0, []string{"Alice says: the dragon sleeps under the mill."}, []string{"evt-7"})[0]
	other := e.say(t, "brom", t0, []string{"Bob says: the harbor smells of tar."}, []string{"evt-8"})[0]
	// An entry written from the message alone is the same recollection;
	// it does not cite the event, the message does.
	noted := &Entry{Type: TypeConversation, Content: "Alice: a dragon sleeps under the mill!", Importance: 8, GameTime: t0}
	noted.Sources.V = character.Sources{MessageIDs: []int64{msg}}
	// A summary cites many messages and is its own result.
	summary := &Entry{Type: TypeContextSynthesis, Content: "Facts: the harbor smells of tar; tar barrels arrived.", Importance: 6, GameTime: t0}
	summary.Sources.V = character.Sources{MessageIDs: []int64{msg, other}, EventRefs: []string{"evt-7", "evt-8"}}
	if err := e.jour.Add(ctx, "brom", noted, summary); err != nil {
		t.Fatal(err)
	}
	// Two facts from one event: each merges with the message it restates
	// (which alone cites the message), never with the other.
	mem := &Memory{Content: "Tar comes in barrels from the south", GameTime: t0,
		Sources: store.NewJSON(character.Sources{EventRefs: []string{"evt-8"}})}
	mem2 := &Memory{Content: "The harbor smells of tar", GameTime: t0,
		Sources: store.NewJSON(character.Sources{EventRefs: []string{"evt-8"}})}
	for _, m := range []*Memory{mem, mem2} {
		if _, err := e.jour.AddMemory(ctx, "brom", m); err != nil {
			t.Fatal(err)
		}
	}
	r := e.retriever(t, plain()...)
	type src struct {
		Kind    string
		Sources character.Sources
	}
	tests := []struct {
		query string
		want  []src
	}{
		// The entry and the message it was written from are one result
		// citing both (the event ref comes from the message).
		{"dragon under the mill", []src{
			{KindJournal, character.Sources{JournalIDs: []int64{noted.ID}, MessageIDs: []int64{msg}, EventRefs: []string{"evt-7"}}},
		}},
		{"tar barrels", []src{
			{KindJournal, character.Sources{JournalIDs: []int64{summary.ID}, MessageIDs: []int64{msg, other}, EventRefs: []string{"evt-7", "evt-8"}}},
			// The message joins the best fact found from its event.
			{KindMemory, character.Sources{JournalIDs: []int64{}, MessageIDs: []int64{other}, EventRefs: []string{"evt-8"}}},
			{KindMemory, character.Sources{JournalIDs: []int64{}, MessageIDs: []int64{}, EventRefs: []string{"evt-8"}}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			rs, err := r.Search(ctx, "brom", tc.query, len(tc.want))
			if err != nil {
				t.Fatal(err)
			}
			got := make([]src, len(rs))
			for i, res := range rs {
				got[i] = src{res.Kind, res.Sources}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("sources (-want +got):\n%s\n%v", diff, contents(rs))
			}
		})
	}
}

func TestNewRetrieverRefusesBadOptions(t *testing.T) {
	emb, _ := llm.NewOfflineEmbedder(0)
	tests := []struct {
		name string
		opt  Option
	}{
		{"negative weight", WithWeights(-0.1, 1)},
		{"zero weights", WithWeights(0, 0)},
		{"NaN weight", WithWeights(math.NaN(), 1)},
		{"zero half-life", WithHalfLife(0)},
		{"recency and importance above 1", WithRecency(0.6, 0.5)},
		{"negative importance", WithRecency(0.1, -0.1)},
		{"neighbour weight above 1", WithNeighbours(1.5)},
		{"negative semantic weight", WithSemantic(-0.1)},
		{"semantic weight above 1", WithSemantic(1.5)},
		{"NaN semantic weight", WithSemantic(math.NaN())},
		{"nil embedder", WithEmbedder(nil, "m")},
		{"unnamed embedder", WithEmbedder(emb, "")},
		{"zero cache", WithCacheBytes(0)},
		{"zero embed batch", WithMaxEmbedPerCall(0)},
		{"negative content bytes", WithMaxContentBytes(-1)},
		{"too few content bytes", WithMaxContentBytes(8)},
	}
	s := NewStore(nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewRetriever(s, tc.opt); !errors.Is(err, ErrBadOption) {
				t.Fatalf("got %v, want ErrBadOption", err)
			}
		})
	}
	if _, err := NewRetriever(nil); !errors.Is(err, ErrBadOption) {
		t.Fatalf("nil store: got %v, want ErrBadOption", err)
	}
	r, err := NewRetriever(s, WithEmbedder(emb, "custom"), WithWeights(0.5, 0.5))
	if err != nil || r.Model() != "custom" {
		t.Fatalf("good options: %v, model %q", err, r.Model())
	}
}

// Searches and writes of several NPCs run in parallel over one retriever
// whose cache holds about one NPC: indexes are dropped and rebuilt while
// others are searched (run with -race).
func TestConcurrentSearchesAndWrites(t *testing.T) {
	e := newEnv(t)
	npcs := []string{"ann", "bo", "cy", "di"}
	for _, id := range npcs {
		e.npc(t, id, t0)
		e.say(t, id, t0, []string{id + " says: the sword of " + id + " is at the forge"}, nil)
	}
	r := e.retriever(t, WithCacheBytes(1<<10))
	ctx := context.Background()
	errs := make(chan error, len(npcs)*2)
	for _, id := range npcs {
		go func() {
			for i := 0; i < 20; i++ {
				rs, err := r.Search(ctx, id, "sword forge", 5)
				if err == nil && (len(rs) == 0 || rs[0].Sources.MessageIDs == nil) {
					err = errors.New(id + ": nothing found")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
		go func() {
			for i := 0; i < 10; i++ {
				m := &Memory{Content: id + " remembers the forge, time " + string(rune('a'+i)), GameTime: t0}
				if _, err := e.jour.AddMemory(ctx, id, m); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 * len(npcs) {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range npcs {
		rs, err := r.Search(ctx, id, "remembers forge", MaxK)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, res := range rs {
			if res.Kind == KindMemory {
				n++
			}
		}
		if n != 10 {
			t.Fatalf("%s: %d memories found, want 10", id, n)
		}
	}
}

// The parallel scan of a large index gives the scores a serial one does,
// and they are the vectors' cosines within the error of their int8 codes.
func TestScanInParallel(t *testing.T) {
	const n, d = 12000, 256 // above the size scanned on one core
	x := newIndex("brom")
	vecs := make([][]float32, n)
	for i := 0; i < n; i++ {
		p := x.add(item{id: int64(i + 1), kind: kindMessage}, "")
		v := make([]float32, d)
		for j := range v {
			v[j] = float32(((i*d+j)*7919)%1000)/1000 - 0.3
		}
		vecs[i] = v
		if err := x.setVec(p, v); err != nil {
			t.Fatal(err)
		}
	}
	q := slices.Clone(vecs[5])
	unit(q)
	refScan(x, q)
	want := slices.Clone(x.scores)
	x.scan(q)
	if x.sparse {
		t.Fatal("a dense query scanned as sparse")
	}
	for i := 0; i < n; i++ {
		if x.scores[i] != want[i] {
			t.Fatalf("item %d: %v, want %v", i, x.scores[i], want[i])
		}
		if c := cosine(q, vecs[i]); math.Abs(float64(x.scores[i])-c) > 0.01 {
			t.Fatalf("item %d: %v, cosine %v", i, x.scores[i], c)
		}
	}
	if top := x.topNInto(nil, x.scores, 0, 3); len(top) != 3 || x.scores[top[0]] < x.scores[5] || x.scores[top[0]] < x.scores[top[1]] || x.scores[top[1]] < x.scores[top[2]] {
		t.Fatalf("topNInto: %v", top)
	}
}

// cosine is the cosine of a and b, in float64.
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}
