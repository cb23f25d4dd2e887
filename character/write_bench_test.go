package character_test

import (
	"context"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// benchWorld is a database of npcs NPCs whose histories were written turn
// by turn, interleaved as a world's ticks write them: each NPC's rows are
// spread over the whole table, as in a world that has aged.
func benchWorld(b *testing.B, npcs, turns int) (*character.Store, *gorm.DB) {
	b.Helper()
	ctx := context.Background()
	db := dbtest.Open(b)
	if err := store.Migrate(ctx, db, character.Migrations()); err != nil {
		b.Fatal(err)
	}
	s := character.NewStore(db)
	for i := range npcs {
		c := valid()
		c.ID = fmt.Sprintf("npc-%d", i)
		if _, err := s.Put(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	for turn := range turns {
		for i := range npcs {
			if err := s.AppendMessages(ctx, fmt.Sprintf("npc-%d", i), benchTurn(turn), counter, character.DefaultOffloadBytes); err != nil {
				b.Fatal(err)
			}
		}
	}
	return s, db
}

// benchTurn is a tick's messages: what the NPC perceived, its call, the
// call's result.
func benchTurn(turn int) []*character.Message {
	id := fmt.Sprintf("call_%d", turn)
	return []*character.Message{
		{Role: llm.RoleUser, Content: fmt.Sprintf("[2026-11-21 10:%02d] alice says: \"Turn %d: have you seen my sword?\"", turn%60, turn), Turn: int64(turn)},
		{Role: llm.RoleAssistant, ToolCalls: store.NewJSON([]character.ToolCall{{ID: id, Name: "say", Args: `{"text":"Hmph. No."}`}}), Turn: int64(turn)},
		{Role: llm.RoleTool, ToolCallID: id, ToolName: "say", Content: "ok", Turn: int64(turn)},
	}
}

// BenchmarkTickInsert writes one tick's messages in a world of 200 NPCs
// of 100 turns each, the NPCs taking turns.
func BenchmarkTickInsert(b *testing.B) {
	s, db := benchWorld(b, 200, 100)
	ctx := context.Background()
	turn := 100
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		npc := fmt.Sprintf("npc-%d", i%200)
		if i%200 == 0 && i > 0 {
			turn++
		}
		err := db.Transaction(func(tx *gorm.DB) error {
			_, err := s.WithTx(tx).InsertMessages(ctx, npc, benchTurn(turn), counter, character.DefaultOffloadBytes)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkArchiveSpan archives 20 turns (60 messages) of an NPC, as a
// compaction does, in a world of 200 NPCs of 100 turns each.
func BenchmarkArchiveSpan(b *testing.B) {
	s, _ := benchWorld(b, 200, 100)
	ctx := context.Background()
	spans := map[string][]int64{}
	for i := range 200 {
		npc := fmt.Sprintf("npc-%d", i)
		live, err := s.LiveMessages(ctx, npc)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range live {
			spans[npc] = append(spans[npc], m.ID)
		}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		npc := fmt.Sprintf("npc-%d", i%200)
		round := i / 200
		if (round+1)*60 > len(spans[npc]) {
			b.Fatalf("%d archivings: past the %d messages each NPC holds", i, len(spans[npc]))
		}
		ids := spans[npc][round*60 : (round+1)*60]
		if err := s.Archive(ctx, npc, ids, nil); err != nil {
			b.Fatal(err)
		}
	}
}
