package tick

import (
	"context"
	"fmt"
	"testing"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
)

// The messages a tick stores hold the counts Measure gives them, those its
// model wrote included: they are measured before the commit, tool results
// in it, and the NPC's running totals add them up.
func TestTickStoresItsMessagesMeasured(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		say(t, env, "alice", fmt.Sprintf("Good morning %d, Brom. Have you seen my sword?", i))
	}
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := env.chars.History(ctx, "brom", character.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	counter := env.eng.Counter(c.Model)
	roles := map[string]int{}
	live := 0
	for _, m := range ms {
		want := m
		character.Measure(&want, counter, c.Masking.OffloadBytes)
		if m.Tokens != want.Tokens || m.ViewTokens != want.ViewTokens || m.MaskTokens != want.MaskTokens || m.Offloaded != want.Offloaded {
			t.Errorf("message %d (%s) stored %d/%d/%d/%v, measures %d/%d/%d/%v", m.ID, m.Role, m.Tokens, m.ViewTokens, m.MaskTokens,
				m.Offloaded, want.Tokens, want.ViewTokens, want.MaskTokens, want.Offloaded)
		}
		roles[m.Role]++
		live += m.PromptTokens()
	}
	if roles[llm.RoleUser] != 3 || roles[llm.RoleAssistant] < 3 {
		t.Fatalf("stored messages by role %v, want 3 perceptions and the NPC's answers", roles)
	}
	if c.State.LiveTokens != live || c.State.LiveMessages != len(ms) {
		t.Errorf("running totals %d tokens in %d messages, the rows %d in %d", c.State.LiveTokens, c.State.LiveMessages, live, len(ms))
	}
}
