package character_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// benchNPCs is how many NPCs the write benchmarks' world holds.
const benchNPCs = 100

// writeWorld is a database of benchNPCs NPCs whose histories are written
// turn by turn, interleaved as a world's ticks write them: each NPC's rows
// are spread over the whole table, as in a world that has aged. live
// holds each NPC's live message ids, oldest first.
type writeWorld struct {
	s    *character.Store
	db   *gorm.DB
	turn int
	live [benchNPCs][]int64
}

func newWriteWorld(b *testing.B, turns int) *writeWorld {
	b.Helper()
	ctx := context.Background()
	db := dbtest.Open(b)
	if err := store.Migrate(ctx, db, character.Migrations()); err != nil {
		b.Fatal(err)
	}
	w := &writeWorld{s: character.NewStore(db), db: db}
	for i := range benchNPCs {
		c := valid()
		c.ID = benchNPC(i)
		if _, err := w.s.Put(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	w.addTurns(b, turns)
	return w
}

func benchNPC(i int) string { return fmt.Sprintf("npc-%d", i%benchNPCs) }

// addTurns writes n more turns of every NPC, a transaction a turn.
func (w *writeWorld) addTurns(b *testing.B, n int) {
	b.Helper()
	ctx := context.Background()
	for range n {
		err := w.db.Transaction(func(tx *gorm.DB) error {
			for i := range benchNPCs {
				msgs := benchTurn(w.turn)
				if err := w.s.WithTx(tx).AppendMessages(ctx, benchNPC(i), msgs, counter, character.DefaultOffloadBytes); err != nil {
					return err
				}
				for _, m := range msgs {
					w.live[i] = append(w.live[i], m.ID)
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		w.turn++
	}
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

// BenchmarkTickInsert writes one tick's messages, in a transaction of its
// own, in a world of 100 NPCs of 60 turns each, the NPCs taking turns.
func BenchmarkTickInsert(b *testing.B) {
	w := newWriteWorld(b, 60)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		turn := w.turn + i/benchNPCs
		err := w.db.Transaction(func(tx *gorm.DB) error {
			_, err := w.s.WithTx(tx).InsertMessages(ctx, benchNPC(i), benchTurn(turn), counter, character.DefaultOffloadBytes)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkArchiveSpan archives 20 turns (60 messages) of an NPC, the
// oldest it holds live, as a compaction does, in a world of 100 NPCs of 60
// turns each, the NPCs taking turns; when they run out, every NPC lives
// 20 turns more (not timed).
func BenchmarkArchiveSpan(b *testing.B) {
	const span = 60
	w := newWriteWorld(b, 60)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		n := i % benchNPCs
		if len(w.live[n]) < span {
			b.StopTimer()
			w.addTurns(b, span/3)
			b.StartTimer()
		}
		if err := w.s.Archive(ctx, benchNPC(n), w.live[n][:span], nil); err != nil {
			b.Fatal(err)
		}
		w.live[n] = w.live[n][span:]
	}
}

// BenchmarkAdvanceState writes one tick's state (its counters and a later
// game time), in a transaction of its own, in a world of 100 NPCs, the NPCs
// taking turns, as a tick's commit does. An NPC's game time is in no index
// (migration character v11).
func BenchmarkAdvanceState(b *testing.B) {
	w := newWriteWorld(b, 1)
	ctx := context.Background()
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := 0; b.Loop(); i++ {
		cols := map[string]any{"tick": int64(i/benchNPCs + 1), "turn": int64(i/benchNPCs + 1), "resume": false,
			"game_time": at.Add(time.Duration(i) * time.Second)}
		err := w.db.Transaction(func(tx *gorm.DB) error {
			_, _, err := w.s.WithTx(tx).AdvanceState(ctx, benchNPC(i), cols, character.HistoryDelta{}, 0)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSightingByName notes a sighting of a name alone (an event with
// no actor id), in a transaction of its own, by an NPC that knows 2,500
// actors by id: the name is looked up among their names through an index
// (migration character v12), not by reading each of their profiles.
func BenchmarkSightingByName(b *testing.B) {
	ctx := context.Background()
	s := character.NewStore(dbtest.Open(b))
	if err := store.Migrate(ctx, s.DB(), character.Migrations()); err != nil {
		b.Fatal(err)
	}
	c := valid()
	c.ID = "brom"
	if _, err := s.Put(ctx, c); err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	err := s.DB().Transaction(func(tx *gorm.DB) error {
		for k := range 2500 {
			if err := s.WithTx(tx).NoteSeen(ctx, "brom", character.ActorKey(fmt.Sprintf("acct:%d", k)), fmt.Sprintf("Traveller %d", k), at); err != nil {
				return err
			}
		}
		return s.WithTx(tx).NoteSeen(ctx, "brom", "alice", "", at)
	})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		if err := s.NoteSeen(ctx, "brom", "alice", "", at.Add(time.Duration(i)*time.Second)); err != nil {
			b.Fatal(err)
		}
	}
}
