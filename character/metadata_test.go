package character_test

import (
	"context"
	"testing"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// SetMessageMetadata replaces one message's metadata and leaves its tokens
// and the NPC's totals as they were.
func TestSetMessageMetadata(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	m := &character.Message{Role: llm.RoleSystem, Summary: true, Content: character.SummaryPrefix + "\nGoal: forge.", Turn: 1}
	appendMsgs(t, s, "brom", m)
	before := checkTotals(t, s, "brom")
	if err := s.SetMessageMetadata(ctx, m.ID, store.NewJSON(map[string]any{"summary_token_count": m.Tokens})); err != nil {
		t.Fatal(err)
	}
	live, err := s.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0].Metadata.V["summary_token_count"] != float64(m.Tokens) || live[0].Tokens != m.Tokens {
		t.Fatalf("live %+v, want the one message with its metadata set and its tokens unchanged", live)
	}
	if after := checkTotals(t, s, "brom"); after != before {
		t.Fatalf("totals %+v, were %+v", after, before)
	}
}
