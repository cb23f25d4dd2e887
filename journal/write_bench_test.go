package journal

import (
	"context"
	"fmt"
	"testing"

	"gorm.io/gorm"
)

// BenchmarkEntryInsert writes one tick's journal entry (a line of
// conversation citing the tick's message), in a transaction of its own,
// in a world of 100 NPCs of 60 entries each, the NPCs taking turns, as a
// world's ticks write them: each NPC's rows are spread over the whole
// table. An entry of a common type below the notable importance goes into
// no index of types nor of the messages it cites (journal migration 8).
func BenchmarkEntryInsert(b *testing.B) {
	const npcs, turns = 100, 60
	e := newEnv(b)
	ctx := context.Background()
	for i := range npcs {
		e.npc(b, fmt.Sprintf("npc-%d", i), t0)
	}
	msg := int64(1)
	entry := func(i int) (string, *Entry) {
		en := &Entry{Type: TypeConversation, Content: fmt.Sprintf("alice says: \"Turn %d: have you seen my sword?\"", i/npcs),
			Importance: 5, GameTime: t0}
		en.Sources.V.MessageIDs = []int64{msg}
		msg += 3
		return fmt.Sprintf("npc-%d", i%npcs), en
	}
	for i := range npcs * turns {
		npc, en := entry(i)
		if err := e.jour.Add(ctx, npc, en); err != nil {
			b.Fatal(err)
		}
	}
	for i := npcs * turns; b.Loop(); i++ {
		npc, en := entry(i)
		err := e.db.Transaction(func(tx *gorm.DB) error { return e.jour.WithTx(tx).Add(ctx, npc, en) })
		if err != nil {
			b.Fatal(err)
		}
	}
}
