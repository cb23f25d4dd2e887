package character_test

import (
	"context"
	"errors"
	"testing"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
)

// ArchiveMessages and InsertMessages inside one transaction, with the NPC's
// row written once from their deltas, leave the running totals as a
// recount finds them and the history at a new revision, as Archive and
// AppendMessages do one after the other. A span that is not live changes
// nothing, and outside a transaction ArchiveMessages refuses to run.
func TestArchiveMessagesWithOneWriteOfTheRow(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	msgs := []*character.Message{user(1, "I lost my sword at the forge."), assistant(1, character.ToolCall{ID: "c1", Name: "say", Args: `{"text":"Look by the anvil."}`}),
		toolResult(1, "c1", "say", "ok"), user(2, "Found it, thanks."), user(3, "And my shield?")}
	appendMsgs(t, s, "brom", msgs...)
	before := checkTotals(t, s, "brom")
	rev := get(t, s, "brom").State.HistoryRev
	span := []int64{msgs[0].ID, msgs[1].ID, msgs[2].ID}

	if _, err := s.ArchiveMessages(ctx, "brom", span, nil); err == nil {
		t.Fatal("ArchiveMessages outside a transaction: no error")
	}
	// A span of which one message is not live is refused, and the
	// transaction changes nothing.
	err := s.DB().Transaction(func(tx *gorm.DB) error {
		_, err := s.WithTx(tx).ArchiveMessages(ctx, "brom", []int64{msgs[0].ID, msgs[1].ID, msgs[2].ID + 1000}, nil)
		return err
	})
	if !errors.Is(err, character.ErrInvalid) {
		t.Fatalf("a span not live: err %v, want ErrInvalid", err)
	}
	if got := checkTotals(t, s, "brom"); got != before {
		t.Fatalf("a refused span changed the totals: %+v, were %+v", got, before)
	}

	sum := &character.Message{Role: llm.RoleSystem, Summary: true, Content: character.SummaryPrefix + "\nThe sword was found.", Turn: 3}
	err = s.DB().Transaction(func(tx *gorm.DB) error {
		ts := s.WithTx(tx)
		archived, err := ts.ArchiveMessages(ctx, "brom", span, nil)
		if err != nil {
			return err
		}
		added, err := ts.InsertMessages(ctx, "brom", []*character.Message{sum}, counter, character.DefaultOffloadBytes)
		if err != nil {
			return err
		}
		return ts.UpdateState(ctx, "brom", archived.Add(added).Columns())
	})
	if err != nil {
		t.Fatal(err)
	}
	after := checkTotals(t, s, "brom")
	if after.ArchivedMessages != before.ArchivedMessages+len(span) || after.LiveMessages != before.LiveMessages-len(span) || after.SummaryTokens != sum.Tokens {
		t.Fatalf("totals %+v after archiving %d messages and adding a summary of %d tokens, were %+v", after, len(span), sum.Tokens, before)
	}
	if got := get(t, s, "brom").State.HistoryRev; got == rev {
		t.Fatal("the history revision did not move")
	}
	live, err := s.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]bool{}
	for _, m := range live {
		ids[m.ID] = true
	}
	if len(live) != 3 || !ids[msgs[3].ID] || !ids[msgs[4].ID] || !ids[sum.ID] {
		t.Fatalf("%d live messages, want the last two and the summary", len(live))
	}
}

// Columns of no change is no change.
func TestHistoryDeltaZeroHasNoColumns(t *testing.T) {
	if cols := (character.HistoryDelta{}).Columns(); len(cols) != 0 {
		t.Fatalf("columns of a zero delta: %v", cols)
	}
	d := character.HistoryDelta{LiveTokens: 5, LiveMessages: 1, Appended: true}.Add(character.HistoryDelta{LiveTokens: -2, ArchivedMessages: 1, Appended: true})
	if d.LiveTokens != 3 || d.LiveMessages != 1 || d.ArchivedMessages != 1 || d.Zero() {
		t.Fatalf("sum %+v", d)
	}
	if cols := d.Columns(); len(cols) != 5 {
		t.Fatalf("columns %v, want the three totals, the archived count and the revision", cols)
	}
}

// ColumnsFrom moves the revision to the value it returns only when the
// revision given is still the stored one, and elsewhere otherwise: the
// write tells whether another came between.
func TestColumnsFromChecksTheRevision(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	appendMsgs(t, s, "brom", user(1, "I lost my sword at the forge."))
	d := character.HistoryDelta{LiveTokens: 3, LiveMessages: 1, Appended: true}
	read := get(t, s, "brom").State.HistoryRev
	cols, next := d.ColumnsFrom(read)
	st, err := s.UpdateStateReturning(ctx, "brom", cols)
	if err != nil {
		t.Fatal(err)
	}
	if st.HistoryRev != next {
		t.Fatalf("written at the stored revision: revision %d, want %d", st.HistoryRev, next)
	}
	// read is stale now.
	cols, next = d.ColumnsFrom(read)
	st2, err := s.UpdateStateReturning(ctx, "brom", cols)
	if err != nil {
		t.Fatal(err)
	}
	if st2.HistoryRev == next || st2.HistoryRev == st.HistoryRev || st2.HistoryRev == read {
		t.Fatalf("written at a stale revision: revision %d (was %d, read at %d, next %d), want another fresh one", st2.HistoryRev, st.HistoryRev, read, next)
	}
	if st2.LiveMessages != st.LiveMessages+1 {
		t.Fatalf("live messages %d after %d: the totals were not added", st2.LiveMessages, st.LiveMessages)
	}
}
