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
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// TestInsertMessagesStoresAsGorm checks that messages inserted inside a
// transaction (where SQLite runs a prepared statement, up to
// MaxPreparedRows rows at once) are stored as gorm stores them alone and
// inside a transaction: the same columns holding the same values.
func TestInsertMessagesStoresAsGorm(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, id := range []string{"filler", "alone", "prepared", "plain"} {
		putNPC(t, s, id)
	}
	// Tool results are measured with their id in the placeholder: ids of
	// two digits throughout keep their token counts alike.
	for range 10 {
		appendMsgs(t, s, "filler", &character.Message{Role: llm.RoleUser, Content: "x"})
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	batch := func(n int) []*character.Message {
		msgs := make([]*character.Message, n)
		for i := range n {
			m := &character.Message{Role: llm.RoleUser, Content: fmt.Sprintf("line %d", i), Turn: int64(i + 1), Tick: 3,
				GameTime: at, CreatedAt: at.Add(time.Millisecond), EventRefs: store.NewJSON([]string{"e1", "e2"})}
			switch i % 4 {
			case 1:
				m.Role = llm.RoleAssistant
				m.Name = "brom"
				m.ToolCalls = store.NewJSON([]character.ToolCall{{ID: "c1", Name: "say", Args: `{"text":"hi"}`}})
			case 2:
				m.Role, m.ToolCallID, m.ToolName = llm.RoleTool, "c1", "say"
				m.Content = strings.Repeat("a long result ", 1000) // offloaded
			case 3:
				m.Role, m.Summary = llm.RoleSystem, true
				m.Content = character.SummaryPrefix + " earlier"
				m.Metadata = store.NewJSON(map[string]any{"k": "v", "n": 2.5})
				m.CreatedAt = time.Time{} // set by the insert
			}
			msgs[i] = m
		}
		return msgs
	}
	write := func(who string, n int) []int64 {
		t.Helper()
		msgs := batch(n)
		var err error
		if who == "alone" {
			_, err = s.InsertMessages(ctx, who, msgs, counter, character.DefaultOffloadBytes)
		} else {
			ws := s
			if who == "plain" {
				ws = character.Unprepared(s)
			}
			err = s.DB().Transaction(func(tx *gorm.DB) error {
				_, err := ws.WithTx(tx).InsertMessages(ctx, who, msgs, counter, character.DefaultOffloadBytes)
				return err
			})
		}
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		ids := make([]int64, n)
		for i, m := range msgs {
			if m.ID <= 0 || (i > 0 && m.ID <= ids[i-1]) {
				t.Fatalf("%s: message %d got id %d after %v", who, i, m.ID, ids[:i])
			}
			ids[i] = m.ID
		}
		return ids
	}
	for _, n := range []int{1, 4, character.MaxPreparedRows, character.MaxPreparedRows + 1} {
		alone := write("alone", n)
		want := dbtest.Rows(t, s.DB(), "messages", "id", alone, "id", "character_id", "created_at")
		for _, who := range []string{"prepared", "plain"} {
			ids := write(who, n)
			got := dbtest.Rows(t, s.DB(), "messages", "id", ids, "id", "character_id", "created_at")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%d messages: %s rows differ from gorm's (-gorm +%s):\n%s", n, who, who, diff)
			}
			// Set by the insert when missing, the creation time alone may
			// differ: where it was given it is stored as given.
			for i, r := range dbtest.Rows(t, s.DB(), "messages", "id", ids) {
				if i%4 != 3 && !cmp.Equal(r["created_at"], dbtest.Rows(t, s.DB(), "messages", "id", alone[i:i+1])[0]["created_at"]) {
					t.Errorf("%s: message %d created at %v, want as given", who, i, r["created_at"])
				}
			}
		}
	}
	if store.IsSQLite(s.DB()) && character.PreparedCount(s) == 0 {
		t.Error("no statement was prepared inside an SQLite transaction")
	}
}

// TestAddEventsStoresAsGorm checks that events posted on SQLite (whose
// transaction runs prepared statements) are stored as gorm stores them:
// the same columns holding the same values, duplicates refused alike.
func TestAddEventsStoresAsGorm(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	ref := func(r string) *string { return &r }
	evs := []character.Event{
		{Ref: ref("r1"), Kind: "say", Actor: "Ann", ActorID: "p1", Target: "Brom", Text: "hello", Room: "inn", At: at},
		{Kind: "emote", Actor: "Ann", Text: "waves", At: at.Add(time.Second)},
		{Ref: ref("r1"), Kind: "say", Text: "hello again", At: at},
	}
	post := map[string]func(id string) (int, int, error){
		"prepared": func(id string) (int, int, error) { return s.AddEvents(ctx, id, evs, 10) },
		"plain":    func(id string) (int, int, error) { return character.Unprepared(s).AddEvents(ctx, id, evs, 10) },
		"in-tx": func(id string) (acc, dup int, err error) {
			err = s.DB().Transaction(func(tx *gorm.DB) error {
				acc, dup, err = s.WithTx(tx).AddEvents(ctx, id, evs, 10)
				return err
			})
			return acc, dup, err
		},
	}
	stored := map[string][]map[string]any{}
	for who, add := range post {
		putNPC(t, s, who)
		if acc, dup, err := add(who); err != nil || acc != 2 || dup != 1 {
			t.Fatalf("%s: AddEvents = %d accepted, %d duplicates, %v; want 2, 1", who, acc, dup, err)
		}
		// An event without a ref is never a duplicate.
		if acc, dup, err := add(who); err != nil || acc != 1 || dup != 2 {
			t.Fatalf("%s: AddEvents again = %d accepted, %d duplicates, %v; want 1, 2", who, acc, dup, err)
		}
		var seqs []int64
		if err := s.DB().Table("events").Where("character_id = ?", who).Order("seq").Pluck("seq", &seqs).Error; err != nil {
			t.Fatal(err)
		}
		rows := dbtest.Rows(t, s.DB(), "events", "seq", seqs, "seq", "character_id")
		for _, r := range rows {
			if r["received_at"] == nil {
				t.Errorf("%s: an event has no received_at", who)
			}
			r["received_at"] = fmt.Sprintf("%T", r["received_at"]) // a time of the post
		}
		stored[who] = rows
		if _, _, err := add("ghost"); !errors.Is(err, character.ErrNotFound) {
			t.Errorf("%s: AddEvents to a missing NPC: %v, want ErrNotFound", who, err)
		}
	}
	for _, who := range []string{"prepared", "in-tx"} {
		if diff := cmp.Diff(stored["plain"], stored[who]); diff != "" {
			t.Errorf("%s rows differ from gorm's (-gorm +%s):\n%s", who, who, diff)
		}
	}
	if store.IsSQLite(s.DB()) && character.PreparedCount(s) == 0 {
		t.Error("no statement was prepared inside an SQLite transaction")
	}
	// Still reads the creation time the prepared way inside a transaction.
	c := get(t, s, "plain")
	if err := s.DB().Transaction(func(tx *gorm.DB) error { return s.WithTx(tx).Still(ctx, c) }); err != nil {
		t.Errorf("Still(plain) in a transaction: %v", err)
	}
}
