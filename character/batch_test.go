package character_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/store"
)

// Tick records and outcomes stored together (AddTicks, AddOutcomes: a
// statement for up to MaxPreparedRows rows inside an SQLite transaction)
// are stored as AddTick and AddOutcome store them one by one: the same
// columns holding the same values, ids in the order given.
func TestAddTicksAndOutcomesStoreAsOneByOne(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	comp := int64(7)
	rows := func(n int, who string) ([]*character.TickRecord, []*character.TickOutcome) {
		recs := make([]*character.TickRecord, n)
		outs := make([]*character.TickOutcome, n)
		for i := range n {
			r := &character.TickRecord{CharacterID: who, Tick: int64(i + 1), At: at.Add(time.Duration(i) * time.Second), GameTime: at,
				ContextTokens: 100 + i, Window: 8192, Utilization: float64(100+i) / 8192, PromptTokens: 90 + i, CompletionTokens: i,
				LLMCalls: 1, Actions: i % 3, FirstMessageID: int64(10 * i), LastMessageID: int64(10*i + 3)}
			if i%2 == 1 {
				r.CompactionID, r.Recovery = &comp, "compacted"
			}
			o := &character.TickOutcome{CharacterID: who, Tick: int64(i + 1), At: r.At, Body: fmt.Sprintf(`{"tick":%d}`, i+1)}
			if i%3 == 0 {
				key := fmt.Sprintf("k%d", i)
				o.Key = &key
			}
			recs[i], outs[i] = r, o
		}
		return recs, outs
	}
	write := func(who string, n int) (recIDs, outIDs []int64) {
		t.Helper()
		recs, outs := rows(n, who)
		ws := s
		if who == "plain" {
			ws = character.Unprepared(s)
		}
		err := s.DB().Transaction(func(tx *gorm.DB) error {
			cs := ws.WithTx(tx)
			if who == "one" {
				for i := range recs {
					if err := cs.AddTick(ctx, recs[i]); err != nil {
						return err
					}
					if err := cs.AddOutcome(ctx, outs[i]); err != nil {
						return err
					}
				}
				return nil
			}
			if err := cs.AddTicks(ctx, recs); err != nil {
				return err
			}
			return cs.AddOutcomes(ctx, outs)
		})
		if err != nil {
			t.Fatalf("%s, %d rows: %v", who, n, err)
		}
		for i := range n {
			recIDs, outIDs = append(recIDs, recs[i].ID), append(outIDs, outs[i].ID)
			if recs[i].ID <= 0 || outs[i].ID <= 0 || (i > 0 && (recs[i].ID <= recIDs[i-1] || outs[i].ID <= outIDs[i-1])) {
				t.Fatalf("%s: row %d got ids %d, %d after %v, %v", who, i, recs[i].ID, outs[i].ID, recIDs[:i], outIDs[:i])
			}
		}
		return recIDs, outIDs
	}
	for _, n := range []int{2, character.MaxPreparedRows, 2*character.MaxPreparedRows + 3} {
		for _, who := range []string{"one", "batch", "plain"} {
			putNPC(t, s, who)
		}
		oneRecs, oneOuts := write("one", n)
		wantRecs := dbtest.Rows(t, s.DB(), "tick_records", "id", oneRecs, "id", "character_id")
		wantOuts := dbtest.Rows(t, s.DB(), "tick_outcomes", "id", oneOuts, "id", "character_id")
		for _, who := range []string{"batch", "plain"} {
			recIDs, outIDs := write(who, n)
			if diff := cmp.Diff(wantRecs, dbtest.Rows(t, s.DB(), "tick_records", "id", recIDs, "id", "character_id")); diff != "" {
				t.Errorf("%d tick records stored by %s differ from one by one (-one +%s):\n%s", n, who, who, diff)
			}
			if diff := cmp.Diff(wantOuts, dbtest.Rows(t, s.DB(), "tick_outcomes", "id", outIDs, "id", "character_id")); diff != "" {
				t.Errorf("%d outcomes stored by %s differ from one by one (-one +%s):\n%s", n, who, who, diff)
			}
		}
		for _, who := range []string{"one", "batch", "plain"} {
			if err := s.Delete(ctx, who); err != nil {
				t.Fatal(err)
			}
		}
	}
	if store.IsSQLite(s.DB()) && character.PreparedCount(s) == 0 {
		t.Error("no statement was prepared inside an SQLite transaction")
	}
}

// An outcome whose key its NPC already used fails the outcomes stored
// with it, which are not stored, with ErrDuplicateKey.
func TestAddOutcomesRefusesAUsedKey(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mira")
	key := "k1"
	at := time.Now().UTC()
	if err := s.AddOutcome(ctx, &character.TickOutcome{CharacterID: "brom", Tick: 1, Key: &key, At: at, Body: `{}`}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		outs := []*character.TickOutcome{
			{CharacterID: "brom", Tick: 2, Key: &key, At: at, Body: `{"tick":2}`},
			{CharacterID: "mira", Tick: 1, Key: &key, At: at, Body: `{"tick":1}`},
			{CharacterID: "mira", Tick: 2, At: at, Body: `{"tick":2}`},
		}[:n]
		err := s.DB().Transaction(func(tx *gorm.DB) error { return s.WithTx(tx).AddOutcomes(ctx, outs) })
		if !errors.Is(err, character.ErrDuplicateKey) {
			t.Errorf("%d outcomes, one under a used key: %v, want ErrDuplicateKey", n, err)
		}
		all, err := s.Outcomes(ctx, character.FeedQuery{Limit: 10})
		if err != nil || len(all) != 1 {
			t.Errorf("after the refused %d: outcomes %+v, %v; want brom's first alone", n, all, err)
		}
	}
}

// The events of several ticks consumed together (ConsumeAll: a statement
// for up to MaxPreparedRows events inside an SQLite transaction) are
// consumed as ConsumeEvents consumes each tick's: by its tick, into its
// message, once. An event consumed already fails them all, and the
// transaction that rolls back leaves every one of them pending.
func TestConsumeAllAsConsumeEvents(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	post := func(npc string, n int) []int64 {
		t.Helper()
		evs := make([]character.Event, n)
		for i := range evs {
			evs[i] = character.Event{Kind: "say", Actor: "Ann", Text: fmt.Sprintf("line %d", i), At: time.Date(2026, 3, 1, 12, 0, i, 0, time.UTC)}
		}
		if _, _, err := s.AddEvents(ctx, npc, evs, 100); err != nil {
			t.Fatal(err)
		}
		pending, err := s.PendingEvents(ctx, npc, 100)
		if err != nil {
			t.Fatal(err)
		}
		seqs := make([]int64, len(pending))
		for i, ev := range pending {
			seqs[i] = ev.Seq
		}
		return seqs
	}
	// consumption is what three ticks of NPCs called prefix-0..2 consume:
	// 1, 4 and 6 events (more than one statement holds).
	consumption := func(prefix string) []character.Consumption {
		var cs []character.Consumption
		for i, n := range []int{1, 4, 6} {
			npc := fmt.Sprintf("%s-%d", prefix, i)
			putNPC(t, s, npc)
			cs = append(cs, character.Consumption{NPC: npc, Seqs: post(npc, n), Tick: int64(3 + i), MessageID: int64(100 + i)})
		}
		return cs
	}
	stored := func(cs []character.Consumption) []map[string]any {
		var seqs []int64
		for _, c := range cs {
			seqs = append(seqs, c.Seqs...)
		}
		// Which NPC and when the rows were written or consumed aside.
		return dbtest.Rows(t, s.DB(), "events", "seq", seqs, "seq", "character_id", "consumed_at", "received_at")
	}
	consume := func(ws *character.Store, cs []character.Consumption, each bool) error {
		return s.DB().Transaction(func(tx *gorm.DB) error {
			if !each {
				return ws.WithTx(tx).ConsumeAll(ctx, cs)
			}
			for _, c := range cs {
				if err := ws.WithTx(tx).ConsumeEvents(ctx, c.NPC, c.Seqs, c.Tick, c.MessageID); err != nil {
					return err
				}
			}
			return nil
		})
	}
	one := consumption("one")
	if err := consume(s, one, true); err != nil {
		t.Fatal(err)
	}
	want := stored(one)
	for _, who := range []string{"all", "plain"} {
		ws := s
		if who == "plain" {
			ws = character.Unprepared(s)
		}
		cs := consumption(who)
		if err := consume(ws, cs, false); err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if diff := cmp.Diff(want, stored(cs)); diff != "" {
			t.Errorf("events consumed by %s differ from one tick at a time (-one +%s):\n%s", who, who, diff)
		}
		for _, c := range cs {
			if n, err := s.PendingCount(ctx, c.NPC); err != nil || n != 0 {
				t.Errorf("%s: %s has %d events pending (%v), want none", who, c.NPC, n, err)
			}
		}
		// Once more: every event is consumed already.
		if err := consume(ws, cs, false); err == nil || !strings.Contains(err.Error(), "already consumed") {
			t.Errorf("%s: consuming them again: %v, want them refused", who, err)
		}
	}
	// One event of the third tick consumed elsewhere fails the others.
	cs := consumption("late")
	if err := s.ConsumeEvents(ctx, cs[2].NPC, cs[2].Seqs[5:], 9, 9); err != nil {
		t.Fatal(err)
	}
	// One statement consumes them all on SQLite, and tells how many of
	// them were consumed already; elsewhere each tick's are consumed in
	// turn, and the error is the third tick's.
	refusal := "1 of 11 were already consumed"
	if !store.IsSQLite(s.DB()) {
		refusal = `consume events of "late-2": 1 of 6 were already consumed`
	}
	if err := consume(s, cs, false); err == nil || !strings.Contains(err.Error(), refusal) {
		t.Errorf("one of 11 consumed elsewhere: %v, want %q", err, refusal)
	}
	for i, c := range cs {
		want := len(c.Seqs)
		if i == 2 {
			want--
		}
		if n, err := s.PendingCount(ctx, c.NPC); err != nil || n != want {
			t.Errorf("%s: %d events pending (%v), want %d: the refused transaction consumed none", c.NPC, n, err, want)
		}
	}
}

// UpdateStateReturning inside an SQLite transaction writes the NPC's row
// through a prepared statement (a compaction's commit runs it while it
// holds the writer): it writes and returns what gorm's way does, values and
// expressions alike, and refuses an NPC that does not exist the same way.
func TestUpdateStateReturningPreparedAsGorm(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	slept := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
	cols := func() map[string]any {
		return map[string]any{
			"live_tokens": gorm.Expr("live_tokens + ?", 40), "summary_tokens": gorm.Expr("summary_tokens + ?", 7),
			"live_messages": gorm.Expr("live_messages + ?", 3), "archived_messages": gorm.Expr("archived_messages + ?", 5),
			"compactions": gorm.Expr("compactions + 1"), "history_rev": gorm.Expr("CASE WHEN history_rev = ? THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END", -1, 11, 99),
			"sleep_mark": int64(12), "last_sleep_at": slept, "compaction_note": "too long", "awaiting": store.NewJSON([]character.PendingCall{{ID: "c1", Tool: "look"}}),
		}
	}
	update := func(ws *character.Store, id string) (character.State, error) {
		var st character.State
		err := s.DB().Transaction(func(tx *gorm.DB) error {
			var err error
			st, err = ws.WithTx(tx).UpdateStateReturning(ctx, id, cols())
			return err
		})
		return st, err
	}
	for _, id := range []string{"prepared", "plain"} {
		putNPC(t, s, id)
	}
	before := character.PreparedCount(s)
	got, err := update(s, "prepared")
	if err != nil {
		t.Fatal(err)
	}
	if store.IsSQLite(s.DB()) && character.PreparedCount(s) == before {
		t.Fatal("UpdateStateReturning inside an SQLite transaction prepared no statement")
	}
	want, err := update(character.Unprepared(s), "plain")
	if err != nil {
		t.Fatal(err)
	}
	if want.HistoryRev != 99 || want.Compactions != 1 || want.LiveTokens != 40 || want.SleepMark != 12 || want.CompactionNote != "too long" {
		t.Fatalf("gorm's update returned %+v", want)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("prepared update returned, against gorm's (-want +got):\n%s", d)
	}
	if d := cmp.Diff(get(t, s, "plain").State, get(t, s, "prepared").State); d != "" {
		t.Errorf("prepared update stored, against gorm's (-want +got):\n%s", d)
	}
	if d := cmp.Diff(got, get(t, s, "prepared").State); d != "" {
		t.Errorf("prepared update returned, against what it stored (-returned +stored):\n%s", d)
	}
	for _, ws := range []*character.Store{s, character.Unprepared(s)} {
		if _, err := update(ws, "nobody"); !errors.Is(err, character.ErrNotFound) {
			t.Errorf("update of an NPC that does not exist: %v, want ErrNotFound", err)
		}
	}
	// A subquery is gorm's to write: the update goes its way, and writes it.
	var st character.State
	err = s.DB().Transaction(func(tx *gorm.DB) error {
		sub := tx.Model(&character.Character{}).Select("tick + 5").Where("id = ?", "plain")
		var err error
		st, err = s.WithTx(tx).UpdateStateReturning(ctx, "prepared", map[string]any{"tick": sub})
		return err
	})
	if err != nil || st.Tick != get(t, s, "plain").State.Tick+5 {
		t.Errorf("update by a subquery: tick %d, %v; want the other NPC's tick and 5", st.Tick, err)
	}
}
