package sleep_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/testdb"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
)

// A compaction's record, written and finished inside an SQLite transaction
// through prepared statements (the commit holds the writer meanwhile), is
// stored as gorm stores it: every field the same but the id.
func TestRecordPreparedAsGorm(t *testing.T) {
	ctx := context.Background()
	db := testdb.Open(t)
	comp, err := sleep.NewCompactor(sleep.CompactorDeps{DB: db, Characters: character.NewStore(db), Journal: journal.NewStore(db),
		Builtin: llm.NewBuiltin()}, sleep.CompactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)
	write := func(c *sleep.Compactor, npc string) int64 {
		t.Helper()
		r := &sleep.Record{CharacterID: npc, Trigger: sleep.TriggerSleep, TokensBefore: 900, MessagesCompacted: 12, Summarizer: "fallback",
			FallbackReason: "model error: timeout", Instruction: "keep the debts", FirstMessageID: 3, LastMessageID: 40, Tick: 17,
			GameTime: at.Add(-time.Hour), CreatedAt: at}
		err := db.Transaction(func(tx *gorm.DB) error {
			if err := sleep.WriteRecord(c, ctx, tx, r); err != nil {
				return err
			}
			if r.ID == 0 {
				t.Fatal("the record written has no id")
			}
			r.TokensAfter, r.SummaryMessageID, r.JournalID, r.Masked, r.DurationMS = 450, 41, 9, 2, 3
			r.Metadata = store.NewJSON(map[string]any{"target_tokens": 4096.0, "target_missed": "too long"})
			return sleep.FinishRecord(c, ctx, tx, r)
		})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	write(sleep.Unprepared(comp), "plain")
	before := sleep.PreparedCount(comp)
	write(comp, "prepared")
	if store.IsSQLite(db) && sleep.PreparedCount(comp) != before+2 {
		t.Fatalf("%d statements prepared, want the record's two", sleep.PreparedCount(comp)-before)
	}
	read := func(npc string) sleep.Record {
		t.Helper()
		rs, err := comp.Records(ctx, npc)
		if err != nil || len(rs) != 1 {
			t.Fatalf("records of %s: %+v, %v", npc, rs, err)
		}
		rs[0].ID, rs[0].CharacterID = 0, ""
		return rs[0]
	}
	want, got := read("plain"), read("prepared")
	if want.TokensAfter != 450 || want.JournalID != 9 || want.Instruction != "keep the debts" || !want.CreatedAt.Equal(at) {
		t.Fatalf("gorm stored %+v", want)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("prepared record, against gorm's (-want +got):\n%s", d)
	}
}
