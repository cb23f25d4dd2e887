package inspect

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/testdb"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
)

// world is an NPC on a real SQLite file, written through the stores and
// the real compactor, so every row is what a run would write.
type world struct {
	t     *testing.T
	ctx   context.Context
	db    *gorm.DB
	chars *character.Store
	jour  *journal.Store
	comp  *sleep.Compactor
	in    *Inspector
	npc   string
	tick  int64
	clock time.Time
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	db := testdb.Open(t)
	w := &world{t: t, ctx: ctx, db: db, chars: character.NewStore(db), jour: journal.NewStore(db), in: New(db), npc: "brom",
		clock: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	var err error
	w.comp, err = sleep.NewCompactor(sleep.CompactorDeps{DB: db, Characters: w.chars, Journal: w.jour, Builtin: llm.NewBuiltin()}, sleep.CompactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c := &character.Character{ID: w.npc, Name: "Brom", Persona: "You are Brom, the blacksmith of Oakvale."}
	c.ApplyDefaults()
	if _, err := w.chars.Put(ctx, c); err != nil {
		t.Fatal(err)
	}
	return w
}

// turn runs one tick by hand: alice says text (an event consumed into a
// user message), Brom answers with a say, the tick is recorded. It returns
// the ids it wrote.
func (w *world) turn(text string) []int64 {
	w.t.Helper()
	w.tick++
	w.clock = w.clock.Add(time.Minute)
	ref := "evt-" + strconv.FormatInt(w.tick, 10)
	if _, _, err := w.chars.AddEvents(w.ctx, w.npc, []character.Event{{Ref: &ref, Kind: "say", Actor: "alice", Text: text, Room: "forge", At: w.clock}}, 0); err != nil {
		w.t.Fatal(err)
	}
	evs, err := w.chars.PendingEvents(w.ctx, w.npc, 10)
	if err != nil {
		w.t.Fatal(err)
	}
	user := &character.Message{Role: "user", Content: "[2026-11-21 10:00] alice says: \"" + text + "\" (in forge)", Turn: w.tick, Tick: w.tick,
		GameTime: w.clock}
	user.EventRefs.V = []string{ref}
	reply := &character.Message{Role: "assistant", Turn: w.tick, Tick: w.tick, GameTime: w.clock}
	reply.ToolCalls.V = []character.ToolCall{{ID: "call_" + ref, Name: "say", Args: `{"text":"Hm, noted."}`}}
	result := &character.Message{Role: "tool", ToolCallID: "call_" + ref, ToolName: "say", Content: "ok", Turn: w.tick, Tick: w.tick, GameTime: w.clock}
	msgs := []*character.Message{user, reply, result}
	if err := w.chars.AppendMessages(w.ctx, w.npc, msgs, llm.NewCounter("builtin"), 0); err != nil {
		w.t.Fatal(err)
	}
	if err := w.chars.ConsumeEvents(w.ctx, w.npc, []int64{evs[0].Seq}, w.tick, user.ID); err != nil {
		w.t.Fatal(err)
	}
	if err := w.chars.UpdateState(w.ctx, w.npc, map[string]any{"tick": w.tick, "turn": w.tick, "game_time": w.clock}); err != nil {
		w.t.Fatal(err)
	}
	c := w.get()
	rec := &character.TickRecord{CharacterID: w.npc, Tick: w.tick, At: w.clock, GameTime: w.clock, ContextTokens: c.ContextTokens(),
		Window: c.ContextWindow, Utilization: c.Utilization(), FirstMessageID: user.ID, LastMessageID: result.ID}
	if err := w.chars.AddTick(w.ctx, rec); err != nil {
		w.t.Fatal(err)
	}
	return []int64{user.ID, reply.ID, result.ID}
}

func (w *world) get() *character.Character {
	w.t.Helper()
	c, err := w.chars.Get(w.ctx, w.npc)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// compact commits a compaction of the live messages ids (the live summary
// is replaced too) with the given summary text.
func (w *world) compact(trigger string, ids []int64, summary string) *sleep.Record {
	w.t.Helper()
	c := w.get()
	live, err := w.chars.LiveMessages(w.ctx, w.npc)
	if err != nil {
		w.t.Fatal(err)
	}
	p := &sleep.Plan{NPC: w.npc, Trigger: trigger}
	want := map[int64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for i := range live {
		switch {
		case live[i].Summary:
			prev := live[i]
			p.Previous = &prev
		case want[live[i].ID]:
			p.Span = append(p.Span, live[i])
		}
	}
	rec, err := w.comp.Commit(w.ctx, c, p, sleep.Summary{Text: summary, Summarizer: sleep.SummarizerLLM})
	if err != nil {
		w.t.Fatal(err)
	}
	return rec
}

// clear archives every live message without a compaction record, as
// DELETE /v1/npcs/{npc}/context does.
func (w *world) clear() {
	w.t.Helper()
	live, err := w.chars.LiveMessages(w.ctx, w.npc)
	if err != nil {
		w.t.Fatal(err)
	}
	var ids []int64
	for _, m := range live {
		ids = append(ids, m.ID)
	}
	if err := w.chars.Archive(w.ctx, w.npc, ids, nil); err != nil {
		w.t.Fatal(err)
	}
}

func liveIDs(a *AsOf) []int64 {
	var ids []int64
	if a.Summary != nil {
		ids = append(ids, a.Summary.ID)
	}
	for _, m := range a.Messages {
		ids = append(ids, m.ID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func cat(parts ...[]int64) []int64 {
	var out []int64
	for _, p := range parts {
		out = append(out, p...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func TestAsOf(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	t1 := w.turn("Good morning.")
	t2 := w.turn("The roads are muddy.")
	rec := w.compact(sleep.TriggerSleep, t1, "## Goal\n- keep the forge going")
	t3 := w.turn("Have you eaten?")
	w.clear()
	t4 := w.turn("Back again.")
	tests := []struct {
		tick        int64
		want        []int64
		summary     int64
		compactions int
		approximate bool
	}{
		{tick: 1, want: t1},
		// t2 is live, archived by the clear only later.
		{tick: 2, want: cat(t1, t2), approximate: true},
		// The sleep ran after tick 2: its summary is live from tick 3 on.
		{tick: 3, want: cat([]int64{rec.SummaryMessageID}, t2, t3), summary: rec.SummaryMessageID, compactions: 1, approximate: true},
		// The clear after tick 3 archived everything, summary included.
		{tick: 4, want: t4, compactions: 1},
	}
	for _, tt := range tests {
		a, err := w.in.AsOf(w.ctx, w.npc, tt.tick)
		if err != nil {
			t.Fatalf("AsOf(%d): %v", tt.tick, err)
		}
		if diff := cmp.Diff(tt.want, liveIDs(a)); diff != "" {
			t.Errorf("AsOf(%d) live ids (-want +got):\n%s", tt.tick, diff)
		}
		got := int64(0)
		if a.Summary != nil {
			got = a.Summary.ID
		}
		if got != tt.summary || a.Compactions != tt.compactions || a.Approximate != tt.approximate {
			t.Errorf("AsOf(%d) = summary %d, %d compactions, approximate %v; want %d, %d, %v",
				tt.tick, got, a.Compactions, a.Approximate, tt.summary, tt.compactions, tt.approximate)
		}
		if a.Record == nil || a.Record.Tick != tt.tick {
			t.Errorf("AsOf(%d).Record = %+v, want the tick's record", tt.tick, a.Record)
		}
	}
	for _, bad := range []int64{0, 5} {
		_, err := w.in.AsOf(w.ctx, w.npc, bad)
		var nf *NotFoundError
		if !errors.As(err, &nf) || nf.Item == "" {
			t.Errorf("AsOf(%d) = %v, want a NotFoundError", bad, err)
		}
	}
	if _, err := w.in.AsOf(w.ctx, "mira", 1); !errors.Is(err, character.ErrNotFound) {
		t.Errorf("AsOf of an unknown npc = %v, want character.ErrNotFound", err)
	}
}

func TestDiffFindsWhatWasLost(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	span := w.turn("Tell Zebulon the tinker I saw Quillon at the Grey Harbor with 40 gold.")
	w.turn("Nice weather.")
	if _, err := w.jour.AddMemory(w.ctx, w.npc, &journal.Memory{Content: "The Grey Harbor is where alice saw someone.", Importance: 5}); err != nil {
		t.Fatal(err)
	}
	rec := w.compact(sleep.TriggerEmergency, span, "## People & facts\n- alice saw Quillon.")
	d, err := w.in.Diff(w.ctx, w.npc, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Text, Kind string
		KeptIn     []string
	}
	rows := func(cs []Candidate) []row {
		var out []row
		for _, c := range cs {
			out = append(out, row{c.Text, c.Kind, c.KeptIn})
			if diff := cmp.Diff([]int64{span[0]}, c.MessageIDs); diff != "" {
				t.Errorf("%q message ids (-want +got):\n%s", c.Text, diff)
			}
		}
		return out
	}
	sum := "m:" + strconv.FormatInt(rec.SummaryMessageID, 10)
	syn := "j:" + strconv.FormatInt(rec.JournalID, 10)
	// In order of first appearance: the event's actor and room, then its text.
	wantLost := []row{{"forge", KindPlace, []string{}}, {"Zebulon", KindName, []string{}}, {"40 gold", KindNumber, []string{}}}
	wantKept := []row{
		{"alice", KindName, []string{sum, "mem:1", syn}},
		{"Quillon", KindName, []string{sum, syn}},
		{"Grey Harbor", KindPlace, []string{"mem:1"}},
	}
	if diff := cmp.Diff(wantLost, rows(d.Lost)); diff != "" {
		t.Errorf("lost (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantKept, rows(d.Kept)); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if d.Summary == nil || d.Summary.ID != rec.SummaryMessageID {
		t.Errorf("summary = %+v, want m:%d", d.Summary, rec.SummaryMessageID)
	}
	if diff := cmp.Diff(span, messageIDs(d.Replaced)); diff != "" {
		t.Errorf("replaced (-want +got):\n%s", diff)
	}
	_, err = w.in.Diff(w.ctx, w.npc, rec.ID+100)
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("Diff of an unknown compaction = %v, want a NotFoundError", err)
	}
}

// What was lost includes lowercase things someone owns and amounts written
// as words; what the summary names is kept.
func TestDiffFindsThingsAndNumberWords(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	span := w.turn("I lost my sword at the forge. I'll pay forty silver and two dozen nails for my old shield.")
	w.turn("Nice weather.")
	rec := w.compact(sleep.TriggerEmergency, span, "## Promises & debts\n- alice will pay two dozen nails for a shield.")
	d, err := w.in.Diff(w.ctx, w.npc, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(cs []Candidate) map[string]string {
		out := map[string]string{}
		for _, c := range cs {
			out[c.Text] = c.Kind
		}
		return out
	}
	lost, kept := kinds(d.Lost), kinds(d.Kept)
	for text, kind := range map[string]string{"sword": KindThing, "forty silver": KindNumber} {
		if lost[text] != kind {
			t.Errorf("lost %q as %q, want it lost as %s; lost %v", text, lost[text], kind, lost)
		}
	}
	for text, kind := range map[string]string{"shield": KindThing, "two dozen nails": KindNumber} {
		if kept[text] != kind {
			t.Errorf("kept %q as %q, want it kept as %s; kept %v", text, kept[text], kind, kept)
		}
	}
}

func messageIDs(ms []character.Message) []int64 {
	ids := make([]int64, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

func TestTimeline(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	t1 := w.turn("One.")
	w.turn("Two.")
	rec := w.compact(sleep.TriggerSleep, t1, "## Goal\n- one")
	w.turn("Three.")
	w.turn("Four.")
	tests := []struct {
		name      string
		q         TimelineQuery
		ticks     []int64
		markers   []int64
		truncated bool
	}{
		{"all", TimelineQuery{}, []int64{1, 2, 3, 4}, []int64{rec.ID}, false},
		{"from the tick after the sleep", TimelineQuery{From: 3}, []int64{3, 4}, []int64{rec.ID}, false},
		{"before the sleep", TimelineQuery{To: 1}, []int64{1}, nil, false},
		{"newest two", TimelineQuery{Limit: 2}, []int64{3, 4}, []int64{rec.ID}, true},
		{"after it", TimelineQuery{From: 4}, []int64{4}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, err := w.in.Timeline(w.ctx, w.npc, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			var ticks, markers []int64
			for _, p := range tl.Points {
				ticks = append(ticks, p.Tick)
				if p.Window != character.DefaultContextWindow || p.Utilization <= 0 {
					t.Errorf("point %+v lacks its window or utilization", p)
				}
			}
			for _, m := range tl.Compactions {
				markers = append(markers, m.ID)
				if m.AfterTick != 2 || m.Trigger != sleep.TriggerSleep || m.UtilizationAfter >= m.UtilizationBefore {
					t.Errorf("marker %+v, want the sleep after tick 2 lowering utilization", m)
				}
			}
			if diff := cmp.Diff(tt.ticks, ticks); diff != "" {
				t.Errorf("ticks (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.markers, markers); diff != "" {
				t.Errorf("markers (-want +got):\n%s", diff)
			}
			if tl.Truncated != tt.truncated {
				t.Errorf("truncated = %v, want %v", tl.Truncated, tt.truncated)
			}
		})
	}
}

func TestOverviewAndItems(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	t1 := w.turn("One.")
	w.turn("Two.")
	rec := w.compact(sleep.TriggerEmergency, t1, "## Goal\n- one")
	o, err := w.in.Overview(w.ctx, w.npc)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{sleep.TriggerEmergency: 1}, o.CompactionsByTrigger); diff != "" {
		t.Errorf("compactions by trigger (-want +got):\n%s", diff)
	}
	if o.Summary == nil || o.Summary.ID != rec.SummaryMessageID || o.LastCompaction == nil || o.LastCompaction.ID != rec.ID {
		t.Errorf("overview summary %+v, last compaction %+v; want m:%d and #%d", o.Summary, o.LastCompaction, rec.SummaryMessageID, rec.ID)
	}
	if o.JournalByType[journal.TypeContextSynthesis] != 1 || o.LastTickAt == nil {
		t.Errorf("overview journal %v, last tick %v; want one context_synthesis entry and a last tick", o.JournalByType, o.LastTickAt)
	}

	m, by, err := w.in.Message(w.ctx, w.npc, t1[0])
	if err != nil || m.ID != t1[0] || by == nil || by.ID != rec.ID {
		t.Errorf("Message(%d) = %+v archived by %+v, %v; want it archived by #%d", t1[0], m, by, err, rec.ID)
	}
	tests := []struct {
		name string
		get  func() error
		item string
	}{
		{"message", func() error { _, _, err := w.in.Message(w.ctx, w.npc, 999); return err }, "message 999"},
		{"entry", func() error { _, err := w.in.Entry(w.ctx, w.npc, 999); return err }, "journal entry 999"},
		{"memory", func() error { _, err := w.in.Memory(w.ctx, w.npc, 999); return err }, "memory 999"},
		{"compaction", func() error { _, err := w.in.Compaction(w.ctx, w.npc, 999); return err }, "compaction 999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.get()
			var nf *NotFoundError
			if !errors.As(err, &nf) || nf.Item != tt.item || !errors.Is(err, ErrNotFound) {
				t.Errorf("err = %v, want a NotFoundError for %q", err, tt.item)
			}
		})
	}
	if _, err := w.in.Overview(w.ctx, "mira"); !errors.Is(err, character.ErrNotFound) {
		t.Errorf("Overview of an unknown npc = %v, want character.ErrNotFound", err)
	}
}
