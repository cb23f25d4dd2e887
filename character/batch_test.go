package character_test

import (
	"context"
	"errors"
	"fmt"
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
