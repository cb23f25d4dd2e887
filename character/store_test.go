package character_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

var counter = llm.NewCounter(llm.BuiltinModel)

func newDB(t *testing.T) *gorm.DB {
	t.Helper()
	return migratedDB(t, character.Migrations())
}

// migratedDB opens a test database with the schema of ms.
func migratedDB(t *testing.T, ms []store.Migration) *gorm.DB {
	t.Helper()
	db := dbtest.Open(t)
	if err := store.Migrate(context.Background(), db, ms); err != nil {
		t.Fatal(err)
	}
	return db
}

func newStore(t *testing.T) *character.Store {
	t.Helper()
	return character.NewStore(newDB(t))
}

// putNPC stores a valid NPC called id.
func putNPC(t *testing.T, s *character.Store, id string) *character.Character {
	t.Helper()
	c := valid()
	c.ID = id
	c.Name = strings.ToUpper(id[:1]) + id[1:]
	if _, err := s.Put(context.Background(), c); err != nil {
		t.Fatalf("Put(%s): %v", id, err)
	}
	return c
}

func get(t *testing.T, s *character.Store, id string) *character.Character {
	t.Helper()
	c, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return c
}

func appendMsgs(t *testing.T, s *character.Store, id string, msgs ...*character.Message) {
	t.Helper()
	if err := s.AppendMessages(context.Background(), id, msgs, counter, character.DefaultOffloadBytes); err != nil {
		t.Fatalf("AppendMessages: %v", err)
	}
}

// checkTotals fails unless the NPC's running totals equal a recount of its
// rows, and returns them.
func checkTotals(t *testing.T, s *character.Store, id string) character.Totals {
	t.Helper()
	c := get(t, s, id)
	got := character.Totals{LiveTokens: c.State.LiveTokens, SummaryTokens: c.State.SummaryTokens,
		LiveMessages: c.State.LiveMessages, ArchivedMessages: c.State.ArchivedMessages}
	want, err := s.Recount(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("running totals differ from a recount (-recount +running):\n%s", diff)
	}
	return got
}

func user(turn int64, text string) *character.Message {
	return &character.Message{Role: llm.RoleUser, Turn: turn, Content: text}
}

func assistant(turn int64, calls ...character.ToolCall) *character.Message {
	return &character.Message{Role: llm.RoleAssistant, Turn: turn, ToolCalls: store.NewJSON(calls)}
}

func toolResult(turn int64, callID, tool, content string) *character.Message {
	return &character.Message{Role: llm.RoleTool, Turn: turn, ToolCallID: callID, ToolName: tool, Content: content}
}

func summary(text string) *character.Message {
	return &character.Message{Role: llm.RoleSystem, Summary: true, Content: character.SummaryPrefix + "\n" + text}
}

func ids(ms []character.Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func msgIDs(ms ...*character.Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestGetListIDs(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.Get(ctx, "brom"); !errors.Is(err, character.ErrNotFound) {
		t.Fatalf("Get of an unknown NPC = %v, want ErrNotFound", err)
	}
	putNPC(t, s, "mara")
	putNPC(t, s, "brom")
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list {
		names = append(names, c.ID)
	}
	if diff := cmp.Diff([]string{"brom", "mara"}, names); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	got, err := s.IDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"brom", "mara"}, got); diff != "" {
		t.Errorf("IDs (-want +got):\n%s", diff)
	}
}

func TestPutCreatesThenReplacesSettings(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	first := valid()
	first.State.SystemTokens, first.State.ToolTokens = 100, 50
	created, err := s.Put(ctx, first)
	if err != nil || !created {
		t.Fatalf("first Put = %v, %v; want created", created, err)
	}
	stored := get(t, s, "brom")
	// Schemas come back as JSON decodes them (numbers as float64).
	first.Tools = viaJSON(t, first.Tools)
	if diff := cmp.Diff(first, stored, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Errorf("stored NPC (-put +got):\n%s", diff)
	}

	// Give it history and state, as ticks would.
	appendMsgs(t, s, "brom", user(1, `[10:00] alice says: "hello"`), assistant(1, character.ToolCall{ID: "c1", Name: "say", Args: `{"text":"hi"}`}))
	gameTime := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	if err := s.UpdateState(ctx, "brom", map[string]any{"tick": 5, "turn": 3, "game_time": gameTime, "compactions": 2}); err != nil {
		t.Fatal(err)
	}
	before := get(t, s, "brom")

	second := valid()
	second.Persona = "You are Brom, a retired blacksmith, now cheerful."
	second.ContextWindow = 16000
	second.Masking.Enabled = boolPtr(false)
	second.Sleep = character.SleepSettings{Cron: "0 22 * * *", Timezone: "Europe/Paris"}
	second.Tools = store.NewJSON([]character.ToolSpec{{Name: "look", Returns: true}})
	// State in the request other than the measured system and tool tokens
	// must not reach the row.
	second.State = character.State{SystemTokens: 120, ToolTokens: 60, LiveTokens: 999999, Tick: 1, Turn: 1}
	created, err = s.Put(ctx, second)
	if err != nil || created {
		t.Fatalf("second Put = %v, %v; want replaced", created, err)
	}
	after := get(t, s, "brom")

	wantState := before.State
	wantState.SystemTokens, wantState.ToolTokens = 120, 60
	if diff := cmp.Diff(wantState, after.State, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Errorf("state after replacing settings (-want +got):\n%s", diff)
	}
	if after.State.Tick != 5 || after.State.Turn != 3 || after.State.LiveMessages != 2 {
		t.Errorf("tick %d turn %d live %d, want 5, 3, 2", after.State.Tick, after.State.Turn, after.State.LiveMessages)
	}
	wantSettings := *second
	wantSettings.Tools = viaJSON(t, second.Tools)
	wantSettings.State = after.State
	wantSettings.CreatedAt = before.CreatedAt
	if diff := cmp.Diff(wantSettings, *after, cmpopts.EquateApproxTime(time.Microsecond)); diff != "" {
		t.Errorf("settings after replace (-want +got):\n%s", diff)
	}
	if !after.UpdatedAt.After(before.UpdatedAt) && !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("UpdatedAt went back: %v then %v", before.UpdatedAt, after.UpdatedAt)
	}
	live, err := s.LiveMessages(ctx, "brom")
	if err != nil || len(live) != 2 {
		t.Errorf("history after replace: %d messages, %v; want 2", len(live), err)
	}
	checkTotals(t, s, "brom")
}

// viaJSON returns v as it reads back from a JSON column.
func viaJSON[T any](t *testing.T, v store.JSON[T]) store.JSON[T] {
	t.Helper()
	b, err := v.Value()
	if err != nil {
		t.Fatal(err)
	}
	var out store.JSON[T]
	if err := out.Scan(b); err != nil {
		t.Fatal(err)
	}
	return out
}

func count(t *testing.T, db *gorm.DB, model any, id string) int64 {
	t.Helper()
	var n int64
	if err := db.Model(model).Where("character_id = ?", id).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	s := character.NewStore(db)
	for _, id := range []string{"brom", "mara"} {
		putNPC(t, s, id)
		appendMsgs(t, s, id, user(1, "hello"), assistant(1))
		ref := id + "-evt"
		if _, _, err := s.AddEvents(ctx, id, []character.Event{{Ref: &ref, Kind: "say", Text: "hi"}, {Kind: "arrive"}}, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpsertProfile(ctx, id, character.ProfileUpdate{Entity: "alice", Kind: "player"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.AddFact(ctx, id, character.Fact{Entity: "alice", Content: "lost her sword"}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddTick(ctx, &character.TickRecord{CharacterID: id, Tick: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "brom"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx, "brom"); !errors.Is(err, character.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
	models := map[string]any{"messages": &character.Message{}, "events": &character.Event{}, "profiles": &character.Profile{},
		"facts": &character.Fact{}, "ticks": &character.TickRecord{}}
	want := map[string]int64{"messages": 2, "events": 2, "profiles": 1, "facts": 1, "ticks": 1}
	for name, m := range models {
		if n := count(t, db, m, "brom"); n != 0 {
			t.Errorf("%d %s of the deleted NPC remain", n, name)
		}
		if n := count(t, db, m, "mara"); n != want[name] {
			t.Errorf("other NPC has %d %s, want %d", n, name, want[name])
		}
	}
	// The ref may be used again by a new NPC of the same id.
	putNPC(t, s, "brom")
	ref := "brom-evt"
	if acc, dup, err := s.AddEvents(ctx, "brom", []character.Event{{Ref: &ref}}, 0); err != nil || acc != 1 || dup != 0 {
		t.Errorf("event ref after re-creation: accepted %d duplicates %d, %v; want 1 accepted", acc, dup, err)
	}

	for _, id := range []string{"ghost", ""} {
		if err := s.Delete(ctx, id); !errors.Is(err, character.ErrNotFound) {
			t.Errorf("Delete(%q) = %v, want ErrNotFound", id, err)
		}
	}
}

func ref(s string) *string { return &s }

func TestAddEventsIsIdempotentOnRef(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	steps := []struct {
		name          string
		npc           string
		evs           []character.Event
		consumeBefore bool
		wantAcc       int
		wantDup       int
	}{
		{name: "new refs and none", npc: "brom", evs: []character.Event{{Ref: ref("a")}, {Ref: ref("b")}, {}, {}}, wantAcc: 4},
		{name: "one seen, one new, one without", npc: "brom", evs: []character.Event{{Ref: ref("a")}, {Ref: ref("c")}, {}}, wantAcc: 2, wantDup: 1},
		{name: "same ref twice in a batch", npc: "brom", evs: []character.Event{{Ref: ref("d")}, {Ref: ref("d")}}, wantAcc: 1, wantDup: 1},
		{name: "seen after consumption", npc: "brom", evs: []character.Event{{Ref: ref("a")}, {Ref: ref("b")}}, consumeBefore: true, wantDup: 2},
		{name: "refs are per NPC", npc: "mara", evs: []character.Event{{Ref: ref("a")}}, wantAcc: 1},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.consumeBefore {
				pending, err := s.PendingEvents(ctx, st.npc, 100)
				if err != nil {
					t.Fatal(err)
				}
				var seqs []int64
				for _, e := range pending {
					seqs = append(seqs, e.Seq)
				}
				if err := s.ConsumeEvents(ctx, st.npc, seqs, 1, 1); err != nil {
					t.Fatal(err)
				}
			}
			acc, dup, err := s.AddEvents(ctx, st.npc, st.evs, 0)
			if err != nil {
				t.Fatal(err)
			}
			if acc != st.wantAcc || dup != st.wantDup {
				t.Errorf("accepted %d duplicates %d, want %d and %d", acc, dup, st.wantAcc, st.wantDup)
			}
		})
	}
}

func TestAddEventsFillsFields(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	paris := time.FixedZone("CET", 3600)
	at := time.Date(2026, 11, 21, 11, 0, 0, 0, paris)
	evs := []character.Event{
		{Seq: 99, CharacterID: "mara", Kind: "say", Actor: "alice", Text: "hi", Room: "forge", At: at, ConsumedAt: &at},
		{Kind: "arrive", Actor: "bob"},
	}
	if _, _, err := s.AddEvents(ctx, "brom", evs, 0); err != nil {
		t.Fatal(err)
	}
	got, err := s.PendingEvents(ctx, "brom", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("pending = %d events, want 2 (a ConsumedAt in the input must not count)", len(got))
	}
	first := got[0]
	if first.CharacterID != "brom" || first.Seq == 99 || first.Kind != "say" || first.Actor != "alice" || first.Room != "forge" {
		t.Errorf("first event stored as %+v", first)
	}
	if _, offset := first.At.Zone(); !first.At.Equal(at) || offset != 0 {
		t.Errorf("At = %v, want %v in UTC", first.At, at)
	}
	if first.ReceivedAt.IsZero() {
		t.Errorf("ReceivedAt not set")
	}
	if second := got[1]; !second.At.Equal(second.ReceivedAt) {
		t.Errorf("event without a time: At %v, want its ReceivedAt %v", second.At, second.ReceivedAt)
	}
}

func TestAddEventsInboxLimit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	if acc, _, err := s.AddEvents(ctx, "brom", []character.Event{{Ref: ref("1")}, {Ref: ref("2")}}, 3); err != nil || acc != 2 {
		t.Fatalf("first post: %d, %v", acc, err)
	}
	tests := []struct {
		name    string
		evs     []character.Event
		wantErr bool
		wantAcc int
		wantDup int
	}{
		{name: "batch larger than the room left", evs: []character.Event{{Ref: ref("3")}, {Ref: ref("4")}}, wantErr: true},
		{name: "batch without refs larger than the room left", evs: []character.Event{{}, {}}, wantErr: true},
		{name: "retry of accepted events", evs: []character.Event{{Ref: ref("1")}, {Ref: ref("2")}}, wantDup: 2},
		{name: "fills the inbox", evs: []character.Event{{Ref: ref("1")}, {Ref: ref("3")}}, wantAcc: 1, wantDup: 1},
		{name: "inbox full", evs: []character.Event{{Ref: ref("4")}}, wantErr: true},
		{name: "retry at a full inbox", evs: []character.Event{{Ref: ref("3")}}, wantDup: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := s.PendingCount(ctx, "brom")
			if err != nil {
				t.Fatal(err)
			}
			acc, dup, err := s.AddEvents(ctx, "brom", tt.evs, 3)
			if tt.wantErr {
				if !errors.Is(err, character.ErrInboxFull) {
					t.Fatalf("AddEvents = %v, want ErrInboxFull", err)
				}
				if after, _ := s.PendingCount(ctx, "brom"); after != before {
					t.Errorf("pending went from %d to %d on a refused post", before, after)
				}
				if acc != 0 || dup != 0 {
					t.Errorf("refused post reported accepted %d duplicates %d", acc, dup)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if acc != tt.wantAcc || dup != tt.wantDup {
				t.Errorf("accepted %d duplicates %d, want %d and %d", acc, dup, tt.wantAcc, tt.wantDup)
			}
		})
	}
	// A refused event was not stored: once there is room it is new.
	pending, _ := s.PendingEvents(ctx, "brom", 10)
	var seqs []int64
	for _, e := range pending {
		seqs = append(seqs, e.Seq)
	}
	if err := s.ConsumeEvents(ctx, "brom", seqs, 1, 1); err != nil {
		t.Fatal(err)
	}
	if acc, dup, err := s.AddEvents(ctx, "brom", []character.Event{{Ref: ref("4")}}, 3); err != nil || acc != 1 || dup != 0 {
		t.Errorf("refused ref after the inbox drained: accepted %d duplicates %d, %v; want accepted", acc, dup, err)
	}
}

func TestPendingAndConsumeEvents(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	for _, batch := range [][]string{{"one", "two"}, {"three", "four", "five"}} {
		var evs []character.Event
		for _, text := range batch {
			evs = append(evs, character.Event{Ref: ref(text), Kind: "say", Text: text})
		}
		if _, _, err := s.AddEvents(ctx, "brom", evs, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.AddEvents(ctx, "mara", []character.Event{{Text: "elsewhere"}}, 0); err != nil {
		t.Fatal(err)
	}
	texts := func(evs []character.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Text)
		}
		return out
	}
	first, err := s.PendingEvents(ctx, "brom", 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"one", "two", "three"}, texts(first)); diff != "" {
		t.Errorf("PendingEvents(3) (-want +got):\n%s", diff)
	}
	if err := s.ConsumeEvents(ctx, "brom", []int64{first[0].Seq, first[1].Seq, first[2].Seq}, 7, 42); err != nil {
		t.Fatal(err)
	}
	rest, err := s.PendingEvents(ctx, "brom", 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"four", "five"}, texts(rest)); diff != "" {
		t.Errorf("PendingEvents after consuming (-want +got):\n%s", diff)
	}
	if n, err := s.PendingCount(ctx, "brom"); err != nil || n != 2 {
		t.Errorf("PendingCount = %d, %v; want 2", n, err)
	}

	// Consuming again, even together with a pending event, fails and
	// consumes nothing.
	for _, seqs := range [][]int64{{first[0].Seq}, {rest[0].Seq, first[1].Seq}} {
		if err := s.ConsumeEvents(ctx, "brom", seqs, 8, 43); err == nil {
			t.Errorf("ConsumeEvents(%v) of consumed events succeeded", seqs)
		}
	}
	if n, _ := s.PendingCount(ctx, "brom"); n != 2 {
		t.Errorf("PendingCount after refused consumes = %d, want 2", n)
	}
	// So it does in a caller's transaction, and with the caller's context
	// ended even a pending event is not consumed.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		ctx  context.Context
		seqs []int64
	}{{ctx, []int64{first[0].Seq}}, {ctx, []int64{rest[0].Seq, first[1].Seq}}, {canceled, []int64{rest[0].Seq}}} {
		err := s.DB().Transaction(func(tx *gorm.DB) error { return s.WithTx(tx).ConsumeEvents(c.ctx, "brom", c.seqs, 8, 43) })
		if err == nil {
			t.Errorf("ConsumeEvents(%v) in a transaction succeeded", c.seqs)
		}
	}
	if n, _ := s.PendingCount(ctx, "brom"); n != 2 {
		t.Errorf("PendingCount after refused consumes in a transaction = %d, want 2", n)
	}
	// Another NPC cannot consume brom's events.
	if err := s.ConsumeEvents(ctx, "mara", []int64{rest[0].Seq}, 1, 1); err == nil {
		t.Errorf("mara consumed brom's event")
	}
	if err := s.ConsumeEvents(ctx, "brom", nil, 9, 44); err != nil {
		t.Errorf("ConsumeEvents of nothing = %v", err)
	}

	got, err := s.EventsByRef(ctx, "brom", []string{"one", "four", "missing"})
	if err != nil {
		t.Fatal(err)
	}
	byText := map[string]character.Event{}
	for _, e := range got {
		byText[e.Text] = e
	}
	if len(got) != 2 {
		t.Fatalf("EventsByRef = %d events, want 2", len(got))
	}
	one := byText["one"]
	if one.ConsumedAt == nil || one.ConsumedTick != 7 || one.MessageID == nil || *one.MessageID != 42 {
		t.Errorf("consumed event = consumed_at %v tick %d message %v; want tick 7 message 42", one.ConsumedAt, one.ConsumedTick, one.MessageID)
	}
	if four := byText["four"]; four.ConsumedAt != nil {
		t.Errorf("pending event has ConsumedAt %v", four.ConsumedAt)
	}
	if none, err := s.EventsByRef(ctx, "brom", nil); err != nil || len(none) != 0 {
		t.Errorf("EventsByRef(nil) = %v, %v", none, err)
	}
}

func TestNPCsWithPending(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, id := range []string{"zed", "mara", "brom", "idle"} {
		putNPC(t, s, id)
	}
	if _, _, err := s.AddEvents(ctx, "zed", []character.Event{{Text: "a"}}, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AddEvents(ctx, "brom", []character.Event{{Text: "b"}, {Text: "c"}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateState(ctx, "mara", map[string]any{"resume": true}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateState(ctx, "brom", map[string]any{"resume": true}); err != nil {
		t.Fatal(err)
	}
	got, err := s.NPCsWithPending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"brom", "mara", "zed"}, got); diff != "" {
		t.Errorf("NPCsWithPending (-want +got):\n%s", diff)
	}

	pending, _ := s.PendingEvents(ctx, "zed", 10)
	if err := s.ConsumeEvents(ctx, "zed", []int64{pending[0].Seq}, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateState(ctx, "mara", map[string]any{"resume": false}); err != nil {
		t.Fatal(err)
	}
	got, err = s.NPCsWithPending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"brom"}, got); diff != "" {
		t.Errorf("NPCsWithPending after consuming and resuming (-want +got):\n%s", diff)
	}
}

func TestAppendMessagesMeasuresTokens(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	huge := strings.Repeat("The forge is hot and the anvil rings. ", 600) // ~22 KB
	u := user(1, `[2026-11-21 10:00] alice says: "Can you look around?"`)
	a := assistant(1, character.ToolCall{ID: "c1", Name: "look", Args: "{}"}, character.ToolCall{ID: "c2", Name: "say", Args: `{"text":"Let me see."}`})
	big := toolResult(1, "c1", "look", huge)
	ok := toolResult(1, "c2", "say", "ok")
	msgs := []*character.Message{u, a, big, ok}
	appendMsgs(t, s, "brom", msgs...)

	for i, m := range msgs {
		if m.ID == 0 || m.CharacterID != "brom" || m.State != character.StateLive {
			t.Errorf("message %d: id %d character %q state %q", i, m.ID, m.CharacterID, m.State)
		}
		if want := counter.Message(m.Full()); m.Tokens != want {
			t.Errorf("message %d: Tokens = %d, want %d", i, m.Tokens, want)
		}
		if want := counter.Message(m.Prompt()); m.ViewTokens != want {
			t.Errorf("message %d: ViewTokens = %d, want the cost of Prompt() %d", i, m.ViewTokens, want)
		}
	}
	if !big.Offloaded || big.ViewTokens >= big.Tokens {
		t.Errorf("oversized result: offloaded %v, view %d of %d tokens; want offloaded and smaller", big.Offloaded, big.ViewTokens, big.Tokens)
	}
	view := big.Prompt().Content
	marker := fmt.Sprintf("stored as message %d", big.ID)
	if !strings.HasPrefix(view, huge[:2000]) || !strings.HasSuffix(view, huge[len(huge)-1000:]) || !strings.Contains(view, marker) {
		t.Errorf("offloaded view is not head + tail + %q: %q", marker, clipForLog(view))
	}
	if ok.Offloaded || u.Offloaded {
		t.Errorf("small messages marked offloaded")
	}
	for _, m := range []*character.Message{big, ok} {
		masked := m.Full()
		masked.Content = character.MaskPlaceholder(m.ID, m.ToolName, m.Tokens)
		if want := counter.Message(masked); m.MaskTokens != want {
			t.Errorf("%s result: MaskTokens = %d, want the placeholder's cost %d", m.ToolName, m.MaskTokens, want)
		}
	}
	if u.MaskTokens != u.Tokens {
		t.Errorf("user message MaskTokens = %d, want its Tokens %d", u.MaskTokens, u.Tokens)
	}

	// The counts are stored, not just set on the structs.
	live, err := s.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	type counts struct {
		Tokens, View, Mask int
		Offloaded          bool
	}
	var want, got []counts
	for _, m := range msgs {
		want = append(want, counts{m.Tokens, m.ViewTokens, m.MaskTokens, m.Offloaded})
	}
	for _, m := range live {
		got = append(got, counts{m.Tokens, m.ViewTokens, m.MaskTokens, m.Offloaded})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored token counts (-want +got):\n%s", diff)
	}
	if live[2].Content != huge {
		t.Errorf("stored content of the offloaded result was changed")
	}

	totals := checkTotals(t, s, "brom")
	wantLive := u.ViewTokens + a.ViewTokens + big.ViewTokens + ok.ViewTokens
	if totals.LiveTokens != wantLive || totals.LiveMessages != 4 || totals.SummaryTokens != 0 {
		t.Errorf("totals = %+v, want %d live tokens in 4 messages", totals, wantLive)
	}

	// A summary counts apart and is listed first.
	sum := summary("## Goal\n- find the sword")
	appendMsgs(t, s, "brom", sum, user(2, "later"))
	totals = checkTotals(t, s, "brom")
	if totals.SummaryTokens != sum.Tokens || totals.LiveMessages != 5 {
		t.Errorf("totals after a summary = %+v, want summary %d and 5 live messages", totals, sum.Tokens)
	}
	live, err = s.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if !live[0].Summary || live[0].ID != sum.ID {
		t.Errorf("LiveMessages[0] = #%d summary %v, want the summary #%d", live[0].ID, live[0].Summary, sum.ID)
	}
	wantOrder := append([]int64{sum.ID}, msgIDs(u, a, big, ok)...)
	if diff := cmp.Diff(wantOrder, ids(live)[:5]); diff != "" {
		t.Errorf("LiveMessages order (-want +got):\n%s", diff)
	}

	if err := s.AppendMessages(ctx, "brom", nil, counter, 0); err != nil {
		t.Errorf("AppendMessages of nothing = %v", err)
	}
}

// maskFixture is three turns of an NPC, each with a look result large
// enough to be worth masking, an exempt inventory result and a tiny "ok".
type maskFixture struct {
	look, inv, ok [3]*character.Message
}

func newMaskFixture(t *testing.T, s *character.Store, id string) *maskFixture {
	t.Helper()
	f := &maskFixture{}
	for i := range 3 {
		turn := int64(i + 1)
		f.look[i] = toolResult(turn, fmt.Sprintf("l%d", turn), "look", strings.Repeat(fmt.Sprintf("A dusty room number %d. ", turn), 40))
		f.inv[i] = toolResult(turn, fmt.Sprintf("i%d", turn), "inventory", strings.Repeat("a sword, a shield, some bread. ", 20))
		f.ok[i] = toolResult(turn, fmt.Sprintf("s%d", turn), "say", "ok")
		appendMsgs(t, s, id, user(turn, "look around"),
			assistant(turn, character.ToolCall{ID: f.look[i].ToolCallID, Name: "look"}, character.ToolCall{ID: f.inv[i].ToolCallID, Name: "inventory"}),
			f.look[i], f.inv[i], f.ok[i])
	}
	return f
}

func TestMaskToolResults(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	f := newMaskFixture(t, s, "brom")
	before := checkTotals(t, s, "brom")

	res, err := s.MaskToolResults(ctx, "brom", 3, []string{"inventory"})
	if err != nil {
		t.Fatal(err)
	}
	masked, saved := res.IDs, res.Saved
	wantSaved := 0
	for _, m := range f.look[:2] {
		wantSaved += m.ViewTokens - m.MaskTokens
	}
	if !slices.Equal(masked, []int64{f.look[0].ID, f.look[1].ID}) || saved != wantSaved {
		t.Errorf("MaskToolResults = %v masked, %d saved; want the first two looks and %d", masked, saved, wantSaved)
	}
	after := checkTotals(t, s, "brom")
	if res.After == nil || res.After.State.LiveTokens != after.LiveTokens || res.After.State.HistoryRev != get(t, s, "brom").State.HistoryRev {
		t.Errorf("MaskToolResults returned the NPC as %+v, want it as stored", res.After)
	}
	if after.LiveTokens != before.LiveTokens-wantSaved {
		t.Errorf("live tokens %d → %d, want %d less", before.LiveTokens, after.LiveTokens, wantSaved)
	}

	byID := map[int64]character.Message{}
	live, err := s.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range live {
		byID[m.ID] = m
	}
	for turn := range 3 {
		look, inv, ok := byID[f.look[turn].ID], byID[f.inv[turn].ID], byID[f.ok[turn].ID]
		if wantMasked := turn < 2; look.Masked != wantMasked {
			t.Errorf("turn %d look masked = %v, want %v", turn+1, look.Masked, wantMasked)
		}
		if inv.Masked {
			t.Errorf("turn %d: exempt inventory result masked", turn+1)
		}
		if ok.Masked {
			t.Errorf("turn %d: an \"ok\" whose placeholder is larger was masked", turn+1)
		}
		if look.Content != f.look[turn].Content {
			t.Errorf("turn %d: masking changed the stored content", turn+1)
		}
	}
	first := byID[f.look[0].ID]
	prompt := first.Prompt().Content
	if want := fmt.Sprintf("recall_archive with id %d", f.look[0].ID); !strings.Contains(prompt, want) || strings.Contains(prompt, "dusty") {
		t.Errorf("masked Prompt() = %q, want a placeholder containing %q", prompt, want)
	}

	// Masking again finds nothing new; without exemptions the inventory goes too.
	if res, err := s.MaskToolResults(ctx, "brom", 3, []string{"inventory"}); err != nil || len(res.IDs) != 0 || res.Saved != 0 || res.After != nil {
		t.Errorf("second MaskToolResults = %+v, %v; want nothing", res, err)
	}
	if res, err := s.MaskToolResults(ctx, "brom", 3, nil); err != nil || len(res.IDs) != 2 {
		t.Errorf("MaskToolResults without exemptions = %v, %v; want the 2 inventory results", res.IDs, err)
	}
	checkTotals(t, s, "brom")
}

func TestMaskMessagesIgnoresOtherRows(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	f := newMaskFixture(t, s, "brom")
	other := newMaskFixture(t, s, "mara")
	if err := s.Archive(ctx, "brom", []int64{f.look[1].ID}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MaskMessages(ctx, "brom", []int64{f.look[2].ID}); err != nil {
		t.Fatal(err)
	}
	live, _ := s.LiveMessages(ctx, "brom")
	userID := live[0].ID
	before := checkTotals(t, s, "brom")
	maraBefore := checkTotals(t, s, "mara")

	ignored := []int64{
		userID,           // not a tool result
		f.look[1].ID,     // archived
		f.look[2].ID,     // already masked
		f.ok[0].ID,       // placeholder larger than the result
		other.look[0].ID, // another NPC's
		999999,           // no such message
	}
	res, err := s.MaskMessages(ctx, "brom", append(ignored, f.look[0].ID))
	masked, saved := res.IDs, res.Saved
	if err != nil {
		t.Fatal(err)
	}
	want := f.look[0].ViewTokens - f.look[0].MaskTokens
	if !slices.Equal(masked, []int64{f.look[0].ID}) || saved != want {
		t.Errorf("MaskMessages = %v masked, %d saved; want [%d] and %d", masked, saved, f.look[0].ID, want)
	}
	if after := checkTotals(t, s, "brom"); after.LiveTokens != before.LiveTokens-want {
		t.Errorf("live tokens %d → %d, want %d less", before.LiveTokens, after.LiveTokens, want)
	}
	if diff := cmp.Diff(maraBefore, checkTotals(t, s, "mara")); diff != "" {
		t.Errorf("the other NPC's totals changed (-before +after):\n%s", diff)
	}
	m, err := s.MessageByID(ctx, "mara", other.look[0].ID)
	if err != nil || m.Masked {
		t.Errorf("the other NPC's result: masked %v, %v", m.Masked, err)
	}
	if res, err := s.MaskMessages(ctx, "brom", nil); err != nil || len(res.IDs) != 0 || res.Saved != 0 {
		t.Errorf("MaskMessages(nil) = %+v, %v", res, err)
	}
}

func TestArchive(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	sum := summary("## Goal\n- find the sword")
	u1, a1 := user(1, "hello"), assistant(1)
	u2, a2 := user(2, "again"), assistant(2)
	appendMsgs(t, s, "brom", sum, u1, a1, u2, a2)
	gone := user(1, "old")
	appendMsgs(t, s, "brom", gone)
	if err := s.Archive(ctx, "brom", []int64{gone.ID}, nil); err != nil {
		t.Fatal(err)
	}
	foreign := user(1, "elsewhere")
	appendMsgs(t, s, "mara", foreign)

	before := checkTotals(t, s, "brom")
	refused := []struct {
		name string
		ids  []int64
	}{
		{"already archived", []int64{u1.ID, gone.ID}},
		{"no such message", []int64{u1.ID, 999999}},
		{"another NPC's message", []int64{u1.ID, foreign.ID}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Archive(ctx, "brom", tt.ids, nil)
			if !errors.Is(err, character.ErrInvalid) {
				t.Fatalf("Archive = %v, want ErrInvalid", err)
			}
			if diff := cmp.Diff(before, checkTotals(t, s, "brom")); diff != "" {
				t.Errorf("a refused Archive changed the totals (-before +after):\n%s", diff)
			}
			if m, _ := s.MessageByID(ctx, "brom", u1.ID); m.State != character.StateLive {
				t.Errorf("a refused Archive archived #%d", u1.ID)
			}
		})
	}

	compaction := int64(17)
	if err := s.Archive(ctx, "brom", []int64{sum.ID, u1.ID, a1.ID}, &compaction); err != nil {
		t.Fatal(err)
	}
	after := checkTotals(t, s, "brom")
	want := character.Totals{
		LiveTokens:       before.LiveTokens - u1.ViewTokens - a1.ViewTokens,
		SummaryTokens:    0,
		LiveMessages:     before.LiveMessages - 2,
		ArchivedMessages: before.ArchivedMessages + 3,
	}
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("totals after Archive (-want +got):\n%s", diff)
	}
	for _, id := range []int64{sum.ID, u1.ID, a1.ID} {
		m, err := s.MessageByID(ctx, "brom", id)
		if err != nil {
			t.Fatalf("archived row #%d: %v", id, err)
		}
		if m.State != character.StateArchived || m.CompactionID == nil || *m.CompactionID != compaction {
			t.Errorf("#%d: state %q compaction %v, want archived by 17", id, m.State, m.CompactionID)
		}
	}
	live, archived, err := s.CountMessages(ctx, "brom")
	if err != nil || live != 2 || archived != 4 {
		t.Errorf("CountMessages = %d live, %d archived, %v; want 2 and 4", live, archived, err)
	}
	lm, _ := s.LiveMessages(ctx, "brom")
	if diff := cmp.Diff(msgIDs(u2, a2), ids(lm)); diff != "" {
		t.Errorf("live history (-want +got):\n%s", diff)
	}
	if err := s.Archive(ctx, "brom", nil, nil); err != nil {
		t.Errorf("Archive of nothing = %v", err)
	}
}

// A span is archived by its range when its ids are every live message
// between its first and its last; a range that also holds a live message
// not planned is refused whole, and a plan with gaps or out of order
// archives exactly what it names.
func TestArchiveByRange(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	u1, x, a1, u2, a2, u3 := user(1, "hello"), user(1, "aside"), assistant(1), user(2, "again"), assistant(2), user(3, "more")
	appendMsgs(t, s, "brom", u1, x, a1, u2, a2, u3)
	if err := s.Archive(ctx, "brom", []int64{x.ID}, nil); err != nil {
		t.Fatal(err)
	}
	state := func(ms ...*character.Message) []string {
		var out []string
		for _, m := range ms {
			got, err := s.MessageByID(ctx, "brom", m.ID)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, got.State)
		}
		return out
	}
	live, archived := character.StateLive, character.StateArchived

	// As many live rows in the range as ids, but x is archived and a1,
	// live, was not planned.
	before := checkTotals(t, s, "brom")
	if err := s.Archive(ctx, "brom", []int64{u1.ID, x.ID, u2.ID}, nil); !errors.Is(err, character.ErrInvalid) {
		t.Fatalf("Archive of a range holding a live message not planned = %v, want ErrInvalid", err)
	}
	if diff := cmp.Diff([]string{live, archived, live, live, live, live}, state(u1, x, a1, u2, a2, u3)); diff != "" {
		t.Errorf("a refused Archive changed states (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, checkTotals(t, s, "brom")); diff != "" {
		t.Errorf("a refused Archive changed the totals (-before +after):\n%s", diff)
	}

	// Out of order, and an id given twice.
	if err := s.Archive(ctx, "brom", []int64{u1.ID, u2.ID, a1.ID, a2.ID, a2.ID}, nil); !errors.Is(err, character.ErrInvalid) {
		t.Fatalf("Archive of an id given twice = %v, want ErrInvalid", err)
	}
	if err := s.Archive(ctx, "brom", []int64{u1.ID, u2.ID, a1.ID, a2.ID}, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{archived, archived, archived, archived, archived, live}, state(u1, x, a1, u2, a2, u3)); diff != "" {
		t.Errorf("after archiving a plan out of order (-want +got):\n%s", diff)
	}
	// A gap: u4 stays live.
	u4, u5, u6 := user(4, "four"), user(5, "five"), user(6, "six")
	appendMsgs(t, s, "brom", u4, u5, u6)
	if err := s.Archive(ctx, "brom", []int64{u3.ID, u5.ID}, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{archived, live, archived, live}, state(u3, u4, u5, u6)); diff != "" {
		t.Errorf("after archiving a plan with a gap (-want +got):\n%s", diff)
	}
	// Archived messages are refused; the last live ones, an archived one
	// between them, are archived, with their compaction.
	compaction := int64(9)
	if err := s.Archive(ctx, "brom", []int64{u3.ID, u4.ID}, &compaction); !errors.Is(err, character.ErrInvalid) {
		t.Fatalf("Archive of an archived message = %v, want ErrInvalid", err)
	}
	if err := s.Archive(ctx, "brom", []int64{u4.ID, u6.ID}, &compaction); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*character.Message{u4, u6} {
		if got, _ := s.MessageByID(ctx, "brom", m.ID); got.State != archived || got.CompactionID == nil || *got.CompactionID != compaction {
			t.Errorf("#%d %s by %v, want archived by compaction 9", m.ID, got.State, got.CompactionID)
		}
	}
	if got := checkTotals(t, s, "brom"); got.LiveMessages != 0 || got.LiveTokens != 0 || got.ArchivedMessages != 9 {
		t.Errorf("totals with every message archived: %+v", got)
	}
}

func TestArchiveOfAManyChunkSpanIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	msgs := make([]*character.Message, 560)
	for i := range msgs {
		msgs[i] = user(int64(i+1), fmt.Sprintf("line %d", i))
	}
	appendMsgs(t, s, "brom", msgs...)
	before := checkTotals(t, s, "brom")

	// The stale id sits past the first chunk of the store's batches.
	span := append(msgIDs(msgs[:530]...), 999999)
	if err := s.Archive(ctx, "brom", span, nil); !errors.Is(err, character.ErrInvalid) {
		t.Fatalf("Archive with a stale id = %v, want ErrInvalid", err)
	}
	if live, archived, _ := s.CountMessages(ctx, "brom"); live != 560 || archived != 0 {
		t.Errorf("after a refused Archive: %d live, %d archived; want 560 and 0", live, archived)
	}
	if diff := cmp.Diff(before, checkTotals(t, s, "brom")); diff != "" {
		t.Errorf("a refused Archive changed the totals (-before +after):\n%s", diff)
	}

	if err := s.Archive(ctx, "brom", msgIDs(msgs[:530]...), nil); err != nil {
		t.Fatal(err)
	}
	if live, archived, _ := s.CountMessages(ctx, "brom"); live != 30 || archived != 530 {
		t.Errorf("after Archive: %d live, %d archived; want 30 and 530", live, archived)
	}
	checkTotals(t, s, "brom")
	got, err := s.MessagesByID(ctx, "brom", msgIDs(msgs...))
	if err != nil || len(got) != 560 {
		t.Fatalf("MessagesByID of 560 ids = %d, %v", len(got), err)
	}
	for i := 1; i < len(got); i++ {
		if got[i].ID <= got[i-1].ID {
			t.Fatalf("MessagesByID not ordered at %d", i)
		}
	}
}

func TestHistory(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	var turns [3][]*character.Message
	for i := range turns {
		turn := int64(i + 1)
		turns[i] = []*character.Message{user(turn, fmt.Sprintf("u%d", turn)), assistant(turn)}
		appendMsgs(t, s, "brom", turns[i]...)
	}
	appendMsgs(t, s, "mara", user(1, "not brom's"))
	if err := s.Archive(ctx, "brom", msgIDs(turns[0]...), nil); err != nil {
		t.Fatal(err)
	}
	all := msgIDs(append(append(append([]*character.Message{}, turns[0]...), turns[1]...), turns[2]...)...)
	tests := []struct {
		name string
		q    character.HistoryQuery
		want []int64
	}{
		{"everything", character.HistoryQuery{}, all},
		{"all", character.HistoryQuery{State: "all"}, all},
		{"live", character.HistoryQuery{State: character.StateLive}, all[2:]},
		{"archived", character.HistoryQuery{State: character.StateArchived}, all[:2]},
		{"before", character.HistoryQuery{Before: all[3]}, all[:3]},
		{"after", character.HistoryQuery{After: all[3]}, all[4:]},
		{"between", character.HistoryQuery{After: all[0], Before: all[3]}, all[1:3]},
		{"turn", character.HistoryQuery{Turn: 2}, all[2:4]},
		{"newest three, oldest first", character.HistoryQuery{Limit: 3}, all[3:]},
		{"newest two before", character.HistoryQuery{Limit: 2, Before: all[4]}, all[2:4]},
		{"newest archived", character.HistoryQuery{Limit: 1, State: character.StateArchived}, all[1:2]},
		{"limit above count", character.HistoryQuery{Limit: 100}, all},
		{"nothing matches", character.HistoryQuery{Turn: 9}, []int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.History(ctx, "brom", tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
				t.Errorf("History(%+v) (-want +got):\n%s", tt.q, diff)
			}
		})
	}
}

func TestMessageByID(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	m := user(1, "hello")
	appendMsgs(t, s, "brom", m)
	got, err := s.MessageByID(ctx, "brom", m.ID)
	if err != nil || got.Content != "hello" {
		t.Fatalf("MessageByID = %+v, %v", got, err)
	}
	for _, tt := range []struct {
		npc string
		id  int64
	}{{"mara", m.ID}, {"brom", m.ID + 100}} {
		if _, err := s.MessageByID(ctx, tt.npc, tt.id); !errors.Is(err, character.ErrNotFound) {
			t.Errorf("MessageByID(%s, %d) = %v, want ErrNotFound", tt.npc, tt.id, err)
		}
	}
	if got, err := s.MessagesByID(ctx, "mara", []int64{m.ID}); err != nil || len(got) != 0 {
		t.Errorf("MessagesByID of another NPC's message = %d rows, %v", len(got), err)
	}
}

func TestRepair(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	appendMsgs(t, s, "brom", summary("## Goal\n- x"), user(1, "hello"), assistant(1))
	want := checkTotals(t, s, "brom")
	if err := s.UpdateState(ctx, "brom", map[string]any{"live_tokens": 1, "summary_tokens": 2, "live_messages": 3, "archived_messages": 4}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Repair(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Repair (-want +got):\n%s", diff)
	}
	checkTotals(t, s, "brom")
}

func TestTicks(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	for _, n := range []int64{3, 1, 5, 2, 4} {
		if err := s.AddTick(ctx, &character.TickRecord{CharacterID: "brom", Tick: n, ContextTokens: int(n) * 100}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddTick(ctx, &character.TickRecord{CharacterID: "mara", Tick: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTick(ctx, &character.TickRecord{CharacterID: "brom", Tick: 3}); err == nil {
		t.Errorf("a second record of tick 3 was accepted")
	}
	tests := []struct {
		from, to int64
		want     []int64
	}{
		{0, 0, []int64{1, 2, 3, 4, 5}},
		{2, 4, []int64{2, 3, 4}},
		{4, 0, []int64{4, 5}},
		{0, 2, []int64{1, 2}},
		{3, 3, []int64{3}},
		{6, 9, []int64{}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d-%d", tt.from, tt.to), func(t *testing.T) {
			rs, err := s.Ticks(ctx, "brom", tt.from, tt.to)
			if err != nil {
				t.Fatal(err)
			}
			got := []int64{}
			for _, r := range rs {
				got = append(got, r.Tick)
				if r.ContextTokens != int(r.Tick)*100 {
					t.Errorf("tick %d: context tokens %d", r.Tick, r.ContextTokens)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Ticks(%d, %d) (-want +got):\n%s", tt.from, tt.to, diff)
			}
		})
	}
}

func TestWithTxRollsBack(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	s := character.NewStore(db)
	putNPC(t, s, "brom")
	boom := errors.New("boom")
	err := db.Transaction(func(tx *gorm.DB) error {
		ts := s.WithTx(tx)
		if ts.DB() != tx {
			t.Errorf("WithTx(tx).DB() is not tx")
		}
		if err := ts.AppendMessages(ctx, "brom", []*character.Message{user(1, "hello")}, counter, 0); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if live, _, _ := s.CountMessages(ctx, "brom"); live != 0 {
		t.Errorf("%d messages survived a rolled-back transaction", live)
	}
	checkTotals(t, s, "brom")
}

func TestLatestMessageID(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	if got, err := s.LatestMessageID(ctx, "brom"); err != nil || got != 0 {
		t.Errorf("LatestMessageID with no history = %d, %v; want 0", got, err)
	}
	first, last := user(1, "one"), user(1, "two")
	appendMsgs(t, s, "brom", first, last)
	appendMsgs(t, s, "mara", user(1, "newer, but mara's"))
	// Archived rows still count: a sleep looks at everything written.
	if err := s.Archive(ctx, "brom", []int64{first.ID, last.ID}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LatestMessageID(ctx, "brom"); err != nil || got != last.ID {
		t.Errorf("LatestMessageID = %d, %v; want #%d", got, err, last.ID)
	}
	live := user(2, "three")
	appendMsgs(t, s, "brom", live)
	if got, err := s.LatestMessageID(ctx, "brom"); err != nil || got != live.ID {
		t.Errorf("LatestMessageID = %d, %v; want the live #%d", got, err, live.ID)
	}
	// The newest message is read through the index, not by walking the
	// NPC's history.
	if store.IsSQLite(s.DB()) {
		var plan []struct {
			Detail string
		}
		if err := s.DB().Raw("EXPLAIN QUERY PLAN "+character.LatestMessageSQL, "brom", "brom").Scan(&plan).Error; err != nil {
			t.Fatal(err)
		}
		searches := 0
		for _, p := range plan {
			if strings.Contains(p.Detail, "messages") {
				searches++
				if !strings.Contains(p.Detail, "character_id=? AND state=?") {
					t.Errorf("query plan reads messages by more than one NPC and state: %+v", plan)
				}
			}
		}
		if searches != 2 {
			t.Errorf("query plan reads messages %d times, want once per state: %+v", searches, plan)
		}
	}
}

func TestPendingTotal(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	putNPC(t, s, "brom")
	putNPC(t, s, "hilda")
	for id, n := range map[string]int{"brom": 2, "hilda": 3} {
		var evs []character.Event
		for i := range n {
			evs = append(evs, character.Event{Kind: "say", Actor: "alice", Text: fmt.Sprint("hello ", i)})
		}
		if _, _, err := s.AddEvents(ctx, id, evs, 100); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.PendingTotal(ctx); err != nil || n != 5 {
		t.Errorf("PendingTotal = %d, %v; want 5", n, err)
	}
}

// The history revision changes with every write to an NPC's messages, and
// only then, so a copy of the live history can be trusted while it holds.
func TestHistoryRevChangesWithEveryHistoryWrite(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	rev := func() int64 {
		t.Helper()
		r, err := s.HistoryRev(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		if c := get(t, s, "brom"); c.State.HistoryRev != r {
			t.Fatalf("HistoryRev %d, the loaded NPC says %d", r, c.State.HistoryRev)
		}
		return r
	}
	seen := map[int64]bool{rev(): true}
	changed := func(op string) {
		t.Helper()
		r := rev()
		if seen[r] {
			t.Fatalf("%s: revision %d was seen before", op, r)
		}
		seen[r] = true
	}
	f := newMaskFixture(t, s, "brom")
	changed("append")
	before := rev()
	if err := s.UpdateState(ctx, "brom", map[string]any{"tick": 7}); err != nil {
		t.Fatal(err)
	}
	if rev() != before {
		t.Fatal("a state update that writes no message changed the revision")
	}
	if _, err := s.MaskMessages(ctx, "brom", []int64{f.look[0].ID}); err != nil {
		t.Fatal(err)
	}
	changed("mask")
	before = rev()
	if res, err := s.MaskMessages(ctx, "brom", []int64{f.look[0].ID}); err != nil || len(res.IDs) != 0 {
		t.Fatalf("masking again: %v %v", res.IDs, err)
	}
	if rev() != before {
		t.Fatal("masking nothing changed the revision")
	}
	if err := s.Archive(ctx, "brom", []int64{f.look[1].ID}, nil); err != nil {
		t.Fatal(err)
	}
	changed("archive")
	if _, err := s.HistoryRev(ctx, "nobody"); !errors.Is(err, character.ErrNotFound) {
		t.Fatalf("HistoryRev of an unknown NPC: %v", err)
	}
}

// Glance reads, in one statement, exactly what Get has for the fields it
// promises, and sees the inbox.
func TestGlance(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	newMaskFixture(t, s, "brom")
	c := get(t, s, "brom")
	c.Compaction.Target = 0.2
	if _, err := s.Put(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateState(ctx, "brom", map[string]any{"tick": 9, "resume": true, "compaction_note": "over target",
		"awaiting": store.NewJSON([]character.PendingCall{{ID: "c1", Tool: "look"}})}); err != nil {
		t.Fatal(err)
	}
	g, err := s.Glance(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	full := get(t, s, "brom")
	if diff := cmp.Diff(full.State, g.NPC.State, cmpopts.IgnoreFields(character.State{}, "GameTime", "LastSleepAt", "SleepMark", "HistoryRev")); diff != "" {
		t.Fatalf("Glance state differs from Get (-get +glance):\n%s", diff)
	}
	if g.NPC.ContextWindow != full.ContextWindow || g.NPC.MaxOutputTokens != full.MaxOutputTokens || g.NPC.ID != "brom" ||
		g.NPC.Compaction.Target != 0.2 {
		t.Fatalf("Glance settings: %+v", g.NPC)
	}
	if g.Pending {
		t.Fatal("pending with an empty inbox")
	}
	if _, _, err := s.AddEvents(ctx, "brom", []character.Event{{Kind: "say", Actor: "alice", Text: "hi"}}, 10); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Glance(ctx, "brom"); err != nil || !g.Pending {
		t.Fatalf("after an event: %+v %v", g, err)
	}
	if _, err := s.Glance(ctx, "nobody"); !errors.Is(err, character.ErrNotFound) {
		t.Fatalf("unknown NPC: %v", err)
	}
	// A glance of a tick that goes on (an event waits, or a turn
	// resumes) holds the whole state and the times State reads; an idle
	// one does not claim to.
	if err := s.UpdateState(ctx, "brom", map[string]any{"game_time": time.Date(2026, 11, 21, 10, 2, 3, 0, time.UTC),
		"last_sleep_at": time.Date(2026, 11, 21, 23, 0, 0, 0, time.UTC), "sleep_mark": 7}); err != nil {
		t.Fatal(err)
	}
	for _, resume := range []bool{true, false} {
		if err := s.UpdateState(ctx, "brom", map[string]any{"resume": resume}); err != nil {
			t.Fatal(err)
		}
		g, err := s.Glance(ctx, "brom")
		if err != nil || !g.Whole() {
			t.Fatalf("resume %v, an event waiting: whole %v (%v), want a whole glance", resume, g != nil && g.Whole(), err)
		}
		st, err := s.State(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(st.State, g.NPC.State); diff != "" || !st.CreatedAt.Equal(g.NPC.CreatedAt) || !st.UpdatedAt.Equal(g.NPC.UpdatedAt) {
			t.Fatalf("the whole glance differs from State (-state +glance):\n%s\ncreated %v %v, updated %v %v", diff,
				st.CreatedAt, g.NPC.CreatedAt, st.UpdatedAt, g.NPC.UpdatedAt)
		}
	}
	putNPC(t, s, "tobin")
	if g, err := s.Glance(ctx, "tobin"); err != nil || g.Whole() || g.Pending {
		t.Fatalf("an idle NPC: %+v %v, want a glance that is not whole", g, err)
	}
}

// State reads, in one statement, exactly the state and the times Get has.
func TestState(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	newMaskFixture(t, s, "brom")
	st, err := s.State(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if st.State.LastSleepAt != nil {
		t.Fatalf("last sleep %v, want none", st.State.LastSleepAt)
	}
	if err := s.UpdateState(ctx, "brom", map[string]any{"tick": 9, "resume": true, "compaction_note": "over target",
		"awaiting":  store.NewJSON([]character.PendingCall{{ID: "c1", Tool: "look"}}),
		"game_time": time.Date(2026, 11, 21, 10, 2, 3, 0, time.UTC), "last_sleep_at": time.Date(2026, 11, 21, 23, 0, 0, 0, time.UTC),
		"sleep_mark": 7}); err != nil {
		t.Fatal(err)
	}
	if st, err = s.State(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	full := get(t, s, "brom")
	if diff := cmp.Diff(full.State, st.State); diff != "" {
		t.Fatalf("State differs from Get (-get +state):\n%s", diff)
	}
	if st.ID != "brom" || !st.CreatedAt.Equal(full.CreatedAt) || !st.UpdatedAt.Equal(full.UpdatedAt) || st.UpdatedAt.IsZero() {
		t.Fatalf("State times: created %v updated %v, Get: %v %v", st.CreatedAt, st.UpdatedAt, full.CreatedAt, full.UpdatedAt)
	}
	if _, err := s.State(ctx, "nobody"); !errors.Is(err, character.ErrNotFound) {
		t.Fatalf("unknown NPC: %v", err)
	}
}

// TestAdvanceStateFoldsTheTotalsAndTheRevisionCheck checks that inserted
// messages and AdvanceState together leave the NPC as AppendMessages and
// UpdateState would, and that AdvanceState tells whether the revision the
// caller read was still the stored one.
func TestAdvanceStateFoldsTheTotalsAndTheRevisionCheck(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	appendMsgs(t, s, "brom", &character.Message{Role: llm.RoleUser, Content: "hello", Turn: 1})
	read := get(t, s, "brom").State.HistoryRev

	turn := func(text string) character.HistoryDelta {
		t.Helper()
		msgs := []*character.Message{{Role: llm.RoleUser, Content: text, Turn: 2},
			{Role: llm.RoleTool, Content: "ok", ToolCallID: "c1", ToolName: "say", Turn: 2}}
		d, err := s.InsertMessages(ctx, "brom", msgs, counter, character.DefaultOffloadBytes)
		if err != nil {
			t.Fatal(err)
		}
		if d.Zero() || d.LiveMessages != 2 || d.LiveTokens != msgs[0].PromptTokens()+msgs[1].PromptTokens() {
			t.Fatalf("delta %+v, want the two messages' tokens", d)
		}
		return d
	}
	// Inside a transaction, as a tick commits (SQLite runs a prepared
	// statement there), and alone.
	inTx := false
	advance := func(cols map[string]any, d character.HistoryDelta, held int64) (st character.State, ok bool, err error) {
		inTx = !inTx
		if !inTx {
			return s.AdvanceState(ctx, "brom", cols, d, held)
		}
		err = s.DB().Transaction(func(tx *gorm.DB) error {
			st, ok, err = s.WithTx(tx).AdvanceState(ctx, "brom", cols, d, held)
			return err
		})
		return st, ok, err
	}
	prepared := character.PreparedCount(s)
	st, held, err := advance(map[string]any{"tick": 2, "turn": 2, "awaiting": store.NewJSON([]character.PendingCall{{ID: "c9", Tool: "give"}})}, turn("again"), read)
	if err != nil || !held {
		t.Fatalf("AdvanceState at the stored revision: held %v, err %v; want held", held, err)
	}
	if store.IsSQLite(s.DB()) && character.PreparedCount(s) == prepared {
		t.Error("AdvanceState inside an SQLite transaction prepared no statement")
	}
	if st.Tick != 2 || st.Turn != 2 || st.HistoryRev == read || st.LiveMessages != 3 || len(st.Awaiting.V) != 1 {
		t.Errorf("state %+v, want tick 2, turn 2, 3 live messages, a call awaited and a new revision", st)
	}
	if got := get(t, s, "brom").State; !cmp.Equal(got, st) {
		t.Errorf("returned state differs from the stored one (-stored +returned):\n%s", cmp.Diff(got, st))
	}
	checkTotals(t, s, "brom")

	// Another writer moved the revision on since it was read.
	st, held, err = advance(map[string]any{"tick": 3}, turn("once more"), read)
	if err != nil || held {
		t.Fatalf("AdvanceState at a stale revision: held %v, err %v; want not held", held, err)
	}
	if st.HistoryRev == read {
		t.Error("the revision did not move on")
	}
	if got := get(t, s, "brom").State; !cmp.Equal(got, st) {
		t.Errorf("returned state differs from the stored one (-stored +returned):\n%s", cmp.Diff(got, st))
	}
	checkTotals(t, s, "brom")

	// Nothing inserted: the revision stays.
	st2, held, err := advance(map[string]any{"tick": 4}, character.HistoryDelta{}, st.HistoryRev)
	if err != nil || !held || st2.HistoryRev != st.HistoryRev {
		t.Errorf("AdvanceState with nothing inserted: rev %d → %d, held %v, err %v", st.HistoryRev, st2.HistoryRev, held, err)
	}

	if _, _, err := s.AdvanceState(ctx, "nobody", map[string]any{"tick": 1}, character.HistoryDelta{}, 0); !errors.Is(err, character.ErrNotFound) {
		t.Errorf("AdvanceState of a missing NPC: %v, want ErrNotFound", err)
	}
}

// Archive writes each batch of 500 in one statement: a span of several
// batches with a message gone stale in its last batch archives nothing,
// and a span of several batches that are all live is counted whole.
func TestArchiveBatches(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	var ms []*character.Message
	for i := range 1100 {
		ms = append(ms, user(int64(i+1), fmt.Sprintf("line %d", i)))
	}
	appendMsgs(t, s, "brom", ms...)
	stale := ms[1050]
	if err := s.Archive(ctx, "brom", []int64{stale.ID}, nil); err != nil {
		t.Fatal(err)
	}
	before := checkTotals(t, s, "brom")
	all := msgIDs(ms...)
	if err := s.Archive(ctx, "brom", all, nil); !errors.Is(err, character.ErrInvalid) {
		t.Fatalf("Archive with a stale message in its last batch = %v, want ErrInvalid", err)
	}
	if diff := cmp.Diff(before, checkTotals(t, s, "brom")); diff != "" {
		t.Errorf("a refused Archive changed the totals (-before +after):\n%s", diff)
	}
	if live, _, err := s.CountMessages(ctx, "brom"); err != nil || live != len(ms)-1 {
		t.Errorf("after a refused Archive: %d live, %v; want %d", live, err, len(ms)-1)
	}
	keep := append(slices.Clone(all[:1050]), all[1051:1099]...)
	compaction := int64(3)
	if err := s.Archive(ctx, "brom", keep, &compaction); err != nil {
		t.Fatal(err)
	}
	after := checkTotals(t, s, "brom")
	if after.LiveMessages != 1 || after.ArchivedMessages != len(ms)-1 || after.LiveTokens != ms[1099].ViewTokens {
		t.Errorf("totals after archiving all but the newest: %+v", after)
	}
	archived, err := s.ArchivedBy(ctx, "brom", compaction)
	if err != nil || len(archived) != len(keep) {
		t.Errorf("ArchivedBy = %d messages, %v; want %d", len(archived), err, len(keep))
	}
}

// LiveMessages, scanned by hand, reads the live history as gorm reads the
// rows: every column, the summary first, NULLs as zero values.
func TestLiveMessagesReadsEveryColumn(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	if got, err := s.LiveMessages(ctx, "brom"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("LiveMessages of an empty history = %#v, %v; want an empty slice", got, err)
	}
	u := user(1, "hello, smith")
	u.EventRefs = store.NewJSON([]string{"ev-1", "ev-2"})
	u.GameTime = time.Date(2026, 11, 24, 10, 4, 0, 0, time.UTC)
	a := assistant(1, character.ToolCall{ID: "c1", Name: "look", Args: `{"at":"sword"}`})
	a.Name = "brom"
	r := toolResult(1, "c1", "look", strings.Repeat("a long observation ", 400))
	r.Metadata = store.NewJSON(map[string]any{"note": "kept", "n": 3.0})
	old := user(1, "archived")
	appendMsgs(t, s, "brom", old, summary("## Goal\n- find the sword"), u, a, r)
	compaction := int64(5)
	if err := s.Archive(ctx, "brom", []int64{old.ID}, &compaction); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MaskMessages(ctx, "brom", []int64{r.ID}); err != nil {
		t.Fatal(err)
	}
	// A row written before a column existed reads NULL there.
	if err := s.DB().Exec("UPDATE messages SET name = NULL, tool_name = NULL, metadata = NULL, view_tokens = NULL WHERE id = ?", u.ID).Error; err != nil {
		t.Fatal(err)
	}
	// NULLs in a row after one that had values there: each row reads its
	// own, not the last row's.
	if err := s.DB().Exec("UPDATE messages SET name = NULL, game_time = NULL, turn = NULL WHERE id = ?", r.ID).Error; err != nil {
		t.Fatal(err)
	}
	var want []character.Message
	if err := s.DB().Where("character_id = ? AND state = ?", "brom", character.StateLive).Order("summary DESC, id").Find(&want).Error; err != nil {
		t.Fatal(err)
	}
	got, err := s.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || !got[0].Summary || len(got[1].EventRefs.V) != 2 || len(got[2].ToolCalls.V) != 1 || got[3].Metadata.V["note"] != "kept" {
		t.Fatalf("LiveMessages = %+v, want the summary, then the three live messages as written", got)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LiveMessages differs from gorm's read (-gorm +LiveMessages):\n%s", diff)
	}
	for i := range min(len(want), len(got)) {
		if w, g := want[i], got[i]; w.GameTime.String() != g.GameTime.String() || w.CreatedAt.String() != g.CreatedAt.String() {
			t.Errorf("message %d: times %v, %v; gorm reads %v, %v", i, g.GameTime, g.CreatedAt, w.GameTime, w.CreatedAt)
		}
	}
}

// A live history read back holds, in every row, the NPC's id it was asked
// for and the package's state and roles, not strings of its own: it is held
// between ticks, and those were three objects a message for the collector.
func TestLiveMessagesShareTheirRepeatedWords(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	appendMsgs(t, s, "brom", user(1, `[2026-11-21 10:00] alice says: "Can you look around?"`),
		assistant(1, character.ToolCall{ID: "c1", Name: "look", Args: "{}"}), toolResult(1, "c1", "look", "a forge"))
	id := strings.Clone("brom")
	live, err := s.LiveMessages(ctx, id)
	if err != nil || len(live) != 3 {
		t.Fatalf("live history: %d messages, %v; want 3", len(live), err)
	}
	for i, m := range live {
		if m.CharacterID != "brom" || m.State != character.StateLive || m.Role != []string{llm.RoleUser, llm.RoleAssistant, llm.RoleTool}[i] {
			t.Fatalf("message %d: %q %q %q", i, m.CharacterID, m.State, m.Role)
		}
		if unsafe.StringData(m.CharacterID) != unsafe.StringData(id) {
			t.Errorf("message %d: its NPC's id is a string of its own", i)
		}
		if unsafe.StringData(m.State) != unsafe.StringData(character.StateLive) {
			t.Errorf("message %d: its state is a string of its own", i)
		}
		if unsafe.StringData(m.Role) != unsafe.StringData([]string{llm.RoleUser, llm.RoleAssistant, llm.RoleTool}[i]) {
			t.Errorf("message %d: its role is a string of its own", i)
		}
	}
}

// The world's clock is read from the NPCs' rows once, then moved on by
// the ticks the Store commits, never back. A game time another process
// wrote is seen only when the clock is asked for fresh, and a fresh clock
// is read again at most once in a second of the caller's clock.
func TestWorldClockFollowsTheTicks(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	at := func(days int) time.Time { return time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, days) }
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	clock := func(fresh bool, want time.Time, why string) {
		t.Helper()
		got, err := s.WorldClock(ctx, fresh, now)
		if err != nil || !got.Equal(want) {
			t.Fatalf("%s: world clock %v (%v), want %v", why, got, err, want)
		}
	}
	clock(false, time.Time{}, "before any tick")
	if _, _, err := s.AdvanceState(ctx, "brom", map[string]any{"tick": 1, "game_time": at(10)}, character.HistoryDelta{}, 0); err != nil {
		t.Fatal(err)
	}
	clock(false, at(10), "after a tick")
	// Another process ticks mara further on.
	if err := s.DB().Exec("UPDATE characters SET game_time = ? WHERE id = ?", at(400), "mara").Error; err != nil {
		t.Fatal(err)
	}
	clock(false, at(10), "another process's tick, not asked fresh")
	clock(true, at(400), "asked fresh")
	if err := s.DB().Exec("UPDATE characters SET game_time = ? WHERE id = ?", at(450), "mara").Error; err != nil {
		t.Fatal(err)
	}
	now = now.Add(900 * time.Millisecond)
	clock(true, at(400), "asked fresh again within a second")
	now = now.Add(200 * time.Millisecond)
	clock(true, at(450), "asked fresh a second later")
	// A tick of an earlier time leaves it; one inside a transaction moves it on.
	if _, _, err := s.AdvanceState(ctx, "brom", map[string]any{"tick": 2, "game_time": at(20)}, character.HistoryDelta{}, 0); err != nil {
		t.Fatal(err)
	}
	clock(false, at(450), "after a tick of an earlier time")
	err := s.DB().Transaction(func(tx *gorm.DB) error {
		_, _, err := s.WithTx(tx).AdvanceState(ctx, "brom", map[string]any{"tick": 3, "game_time": at(500)}, character.HistoryDelta{}, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	clock(false, at(500), "after a tick inside a transaction")
	// A new Store reads it from the rows.
	if got, err := character.NewStore(s.DB()).WorldClock(ctx, false, now); err != nil || !got.Equal(at(500)) {
		t.Fatalf("a new Store: world clock %v (%v), want %v", got, err, at(500))
	}
}
