package sleep

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// simHistory is an in-memory NPC history on which plans are applied the way
// Commit applies them, so thousands of histories can be checked quickly. The
// database path is checked by the engine's randomized test.
type simHistory struct {
	c        *character.Character
	live     []character.Message // summary first when there is one
	archived map[int64]bool
	written  map[int64]bool
	nextID   int64
	nextCall int
}

func (s *simHistory) add(m character.Message) {
	s.nextID++
	m.ID = s.nextID
	if m.ViewTokens == 0 {
		m.ViewTokens = m.Tokens
	}
	if m.MaskTokens == 0 {
		m.MaskTokens = m.ViewTokens
	}
	s.live = append(s.live, m)
	s.written[m.ID] = true
}

func (s *simHistory) totals() {
	st := &s.c.State
	st.LiveTokens, st.SummaryTokens, st.LiveMessages = 0, 0, 0
	for i := range s.live {
		if s.live[i].Summary {
			st.SummaryTokens += s.live[i].PromptTokens()
			continue
		}
		st.LiveTokens += s.live[i].PromptTokens()
		st.LiveMessages++
	}
}

func (s *simHistory) turn(rng *rand.Rand) {
	s.c.State.Turn++
	t := s.c.State.Turn
	s.add(character.Message{Role: llm.RoleUser, Turn: t, Tokens: 10 + rng.IntN(s.c.ContextWindow/8)})
	for step := rng.IntN(4); step > 0; step-- {
		var calls []character.ToolCall
		for n := 1 + rng.IntN(4); n > 0; n-- {
			s.nextCall++
			calls = append(calls, character.ToolCall{ID: fmt.Sprintf("c%d", s.nextCall), Name: []string{"look", "inventory", "say"}[rng.IntN(3)]})
		}
		s.add(character.Message{Role: llm.RoleAssistant, Turn: t, Tokens: 10 + 20*len(calls), ToolCalls: store.NewJSON(calls)})
		for _, tc := range calls {
			full := 5 + rng.IntN(60)
			view := full
			if rng.IntN(8) == 0 { // huge: sent offloaded, head and tail
				full = 2000 + rng.IntN(20000)
				view = 700 + rng.IntN(100)
			}
			s.add(character.Message{Role: llm.RoleTool, Turn: t, ToolCallID: tc.ID, ToolName: tc.Name, Tokens: full, ViewTokens: view, MaskTokens: 35})
		}
	}
	if rng.IntN(3) > 0 {
		s.add(character.Message{Role: llm.RoleAssistant, Turn: t, Tokens: 5 + rng.IntN(120)})
	}
	s.totals()
}

// maskBefore masks tool results of turns before turn, like the store does.
func (s *simHistory) maskBefore(turn int64) {
	for i := range s.live {
		m := &s.live[i]
		if m.Role == llm.RoleTool && !m.Masked && m.Turn < turn && !s.c.Masking.Exempt(m.ToolName) && m.MaskTokens < m.ViewTokens {
			m.Masked = true
		}
	}
	s.totals()
}

// apply commits a plan the way Commit does.
func (s *simHistory) apply(t *testing.T, p *Plan) {
	mask := map[int64]bool{}
	for _, id := range p.Mask {
		mask[id] = true
	}
	gone := map[int64]bool{}
	for _, id := range p.SpanIDs() {
		gone[id] = true
	}
	var kept []character.Message
	for _, m := range s.live {
		if gone[m.ID] {
			if s.archived[m.ID] {
				t.Fatalf("message %d archived twice", m.ID)
			}
			s.archived[m.ID] = true
			continue
		}
		if mask[m.ID] {
			m.Masked = true
		}
		kept = append(kept, m)
	}
	if len(kept) > 0 && kept[0].Summary {
		t.Fatalf("plan kept the previous summary %d next to a new one", kept[0].ID)
	}
	s.nextID++
	sum := character.Message{ID: s.nextID, Role: llm.RoleSystem, Summary: true, Tokens: p.SummaryBudget, ViewTokens: p.SummaryBudget, MaskTokens: p.SummaryBudget}
	s.written[sum.ID] = true
	s.live = append([]character.Message{sum}, kept...)
	s.totals()
}

func pairsOK(ms []character.Message) error {
	open := map[string]bool{}
	for _, m := range ms {
		if m.Role == llm.RoleTool {
			if !open[m.ToolCallID] {
				return fmt.Errorf("result %s (message %d) without its call", m.ToolCallID, m.ID)
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			return fmt.Errorf("calls %v without results before message %d", open, m.ID)
		}
		for _, tc := range m.ToolCalls.V {
			open[tc.ID] = true
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("calls %v without results", open)
	}
	return nil
}

func TestPlanInvariantsOverThousandsOfHistories(t *testing.T) {
	const histories = 3000
	var compactions, hugeTurns int
	for h := 0; h < histories; h++ {
		rng := rand.New(rand.NewPCG(uint64(h), 11))
		on := rng.IntN(4) > 0
		c := &character.Character{ID: "npc", Name: "N", Persona: "p", ContextWindow: []int{2048, 4096, 8192, 32768}[rng.IntN(4)], MaxOutputTokens: 256,
			Compaction: character.CompactionSettings{PreserveRecentMessages: []int{1, 4, 20, 50}[rng.IntN(4)], PreserveRatio: []float64{0.05, 0.2, 0.4}[rng.IntN(3)]},
			Masking:    character.MaskingSettings{Enabled: &on, KeepRecentTurns: []int{1, 3, 10}[rng.IntN(3)]}}
		c.ApplyDefaults()
		if rng.IntN(3) == 0 {
			c.Masking.ExemptTools = store.NewJSON([]string{"inventory"})
		}
		c.State.SystemTokens, c.State.ToolTokens = 200+rng.IntN(200), 300+rng.IntN(300)
		s := &simHistory{c: c, archived: map[int64]bool{}, written: map[int64]bool{}}
		for turns := 5 + rng.IntN(80); turns > 0; turns-- {
			s.turn(rng)
			if c.Masking.On() {
				s.maskBefore(c.State.Turn - int64(c.Masking.KeepRecentTurns) + 1)
			}
			trigger := ""
			switch {
			case c.Utilization() >= c.Compaction.EmergencyThreshold:
				s.maskBefore(c.State.Turn)
				if c.Utilization() >= c.Compaction.EmergencyThreshold {
					trigger = TriggerEmergency
				}
			case c.Utilization() >= c.Compaction.SleepThreshold && rng.IntN(2) == 0:
				trigger = TriggerSleep
			case rng.IntN(20) == 0:
				trigger = TriggerManual
			}
			if trigger != "" {
				p := NewPlan(c, s.live, trigger, "")
				if p.Empty() {
					if len(p.Mask) > 0 {
						for i := range s.live {
							for _, id := range p.Mask {
								if s.live[i].ID == id {
									s.live[i].Masked = true
								}
							}
						}
						s.totals()
					}
				} else {
					compactions++
					if len(p.Mask) > 0 {
						hugeTurns++
					}
					for _, m := range p.Span {
						if m.Turn == c.State.Turn && p.Keep != nil && len(p.Keep) > 0 && p.Keep[0].Turn == m.Turn {
							t.Fatalf("history %d: the cut splits turn %d", h, m.Turn)
						}
					}
					if len(p.Keep) == 0 || p.Keep[0].Role != llm.RoleUser {
						t.Fatalf("history %d: kept part does not start a turn: %+v", h, p.Keep)
					}
					s.apply(t, p)
					// (c) kept history under target, or the newest turn alone.
					target := LimitsFor(c, p.SummaryBudget).TargetTokens
					if c.State.LiveTokens > target {
						for _, m := range s.live[1:] {
							if m.Turn != c.State.Turn {
								t.Fatalf("history %d: %s compaction kept %d tokens over target %d with older turns", h, trigger, c.State.LiveTokens, target)
							}
						}
					}
				}
			}
			// (a) calls and results stay paired in what is sent.
			if err := pairsOK(s.live); err != nil {
				t.Fatalf("history %d after %q: %v", h, trigger, err)
			}
			// (d) the prompt fits at send time.
			if c.Utilization() >= c.Compaction.EmergencyThreshold {
				// Only possible when the newest turn alone is too big even
				// masked: every older message must be gone by now.
				for _, m := range s.live {
					if !m.Summary && m.Turn != c.State.Turn {
						t.Fatalf("history %d: over the emergency threshold (%.2f) with older turns live", h, c.Utilization())
					}
				}
			}
		}
		// (b) every message ever written is live or archived, exactly once.
		seen := map[int64]bool{}
		for _, m := range s.live {
			if s.archived[m.ID] || seen[m.ID] {
				t.Fatalf("history %d: message %d both live and archived, or live twice", h, m.ID)
			}
			seen[m.ID] = true
		}
		for id := range s.written {
			if !seen[id] && !s.archived[id] {
				t.Fatalf("history %d: message %d lost", h, id)
			}
		}
	}
	if compactions < histories || hugeTurns == 0 {
		t.Fatalf("generator too gentle: %d compactions, %d huge turns over %d histories", compactions, hugeTurns, histories)
	}
	t.Logf("%d histories, %d compactions, %d huge turns", histories, compactions, hugeTurns)
}

// sixTurnsInSmallWindow is an NPC with a 2048-token window, 222 tokens of
// system prompt and 496 of tools, six finished turns of 40 + 50 tokens, and
// turn 7 begun.
func sixTurnsInSmallWindow() (*character.Character, *simHistory) {
	c := &character.Character{ID: "npc", Name: "N", Persona: "p", ContextWindow: 2048, MaxOutputTokens: 204}
	c.ApplyDefaults()
	c.State.SystemTokens, c.State.ToolTokens = 222, 496
	s := &simHistory{c: c, archived: map[int64]bool{}, written: map[int64]bool{}}
	for turn := int64(1); turn <= 6; turn++ {
		c.State.Turn = turn
		s.add(character.Message{Role: llm.RoleUser, Turn: turn, Tokens: 40})
		s.add(character.Message{Role: llm.RoleAssistant, Turn: turn, Tokens: 50})
	}
	c.State.Turn = 7
	return c, s
}

// When the newest turn takes more than the target leaves, the summary
// gives way so the compaction still ends at its target; it never goes below
// MinSummaryBudget, and with room to spare it keeps its usual budget.
func TestPlanSummaryGivesWayToTheNewestTurn(t *testing.T) {
	plan := func(newest int) *Plan {
		c, s := sixTurnsInSmallWindow()
		s.add(character.Message{Role: llm.RoleUser, Turn: 7, Tokens: newest})
		s.totals()
		return NewPlan(c, s.live, TriggerEmergency, "")
	}
	target := 1024 // 0.5 × 2048
	for _, tc := range []struct {
		newest int
		want   int
	}{
		{newest: 40, want: 204},                            // room to spare: the usual tenth of the window
		{newest: 200, want: target - 222 - 496 - 200 - 12}, // gives way, ends at the target
		{newest: 280, want: MinSummaryBudget},              // no further than the floor
	} {
		p := plan(tc.newest)
		if p.Empty() {
			t.Fatalf("newest %d: nothing to compact", tc.newest)
		}
		if p.SummaryBudget != tc.want {
			t.Errorf("newest turn of %d tokens: summary budget %d, want %d", tc.newest, p.SummaryBudget, tc.want)
		}
	}
}

// A tool result the model has not read yet is kept whole when the prompt
// can still be sent: masking it would hide what the model is about to
// answer. It does not shrink the summary either, since it is masked once
// read; only past the emergency threshold is it masked.
func TestPlanKeepsUnreadResultsWhole(t *testing.T) {
	plan := func(result int) *Plan {
		c, s := sixTurnsInSmallWindow()
		s.add(character.Message{Role: llm.RoleUser, Turn: 7, Tokens: 32})
		call := character.ToolCall{ID: "c1", Name: "look"}
		s.add(character.Message{Role: llm.RoleAssistant, Turn: 7, Tokens: 47, ToolCalls: store.NewJSON([]character.ToolCall{call})})
		s.add(character.Message{Role: llm.RoleTool, Turn: 7, ToolCallID: "c1", ToolName: "look", Tokens: result, MaskTokens: 41})
		s.totals()
		return NewPlan(c, s.live, TriggerEmergency, "")
	}
	p := plan(517)
	if p.Empty() || len(p.Mask) != 0 {
		t.Fatalf("unread result of 517 tokens: plan masks %v (empty %v)", p.Mask, p.Empty())
	}
	// The summary budget is what it would be with the result masked.
	if want := 1024 - 222 - 496 - (32 + 47 + 41) - summaryFraming; p.Unread != 517-41 || p.SummaryBudget != want {
		t.Errorf("unread %d (want %d), summary budget %d (want %d)", p.Unread, 517-41, p.SummaryBudget, want)
	}
	// Past what the emergency threshold allows, it is masked after all.
	p = plan(900)
	if len(p.Mask) != 1 || p.Unread != 0 {
		t.Errorf("unread result of 900 tokens: masked %v, unread %d; want it masked", p.Mask, p.Unread)
	}
}

// A plan made ahead of a growth it foresees cuts where a plan made once
// that growth has come would: the messages it keeps and those that come
// cost what the later plan keeps, within a turn; it does not shrink the
// summary, and foreseeing nothing is NewPlan. (In a window whose target
// leaves room for little more than the newest turn, the later plan may
// archive that turn, which a plan ahead never does.)
func TestPlanAheadCutsAsThePlanAfterTheGrowth(t *testing.T) {
	for _, window := range []int{4096, 8192} {
		build := func() (*character.Character, *simHistory) {
			c := &character.Character{ID: "npc", Name: "N", Persona: "p", ContextWindow: window, MaxOutputTokens: 204}
			c.ApplyDefaults()
			c.State.SystemTokens, c.State.ToolTokens = 222, 496
			s := &simHistory{c: c, archived: map[int64]bool{}, written: map[int64]bool{}}
			for turn := int64(1); turn <= int64(window/100); turn++ {
				c.State.Turn = turn
				s.add(character.Message{Role: llm.RoleUser, Turn: turn, Tokens: 40})
				s.add(character.Message{Role: llm.RoleAssistant, Turn: turn, Tokens: 50})
			}
			s.totals()
			return c, s
		}
		kept := func(p *Plan) (n int) {
			for i := range p.Keep {
				n += p.Keep[i].PromptTokens()
			}
			return n
		}
		const foreseen = 300
		c, s := build()
		ahead := NewPlanAhead(c, s.live, TriggerBackground, foreseen)
		now := NewPlan(c, s.live, TriggerEmergency, "")
		if zero := NewPlanAhead(c, s.live, TriggerBackground, 0); len(zero.Keep) != len(now.Keep) || zero.SummaryBudget != now.SummaryBudget {
			t.Fatalf("window %d: a plan ahead of nothing keeps %d messages (summary %d), NewPlan %d (%d)", window, len(zero.Keep), zero.SummaryBudget, len(now.Keep), now.SummaryBudget)
		}
		// The growth comes: the next turn's message of foreseen tokens.
		c2, s2 := build()
		c2.State.Turn++
		s2.add(character.Message{Role: llm.RoleUser, Turn: c2.State.Turn, Tokens: foreseen})
		s2.totals()
		later := NewPlan(c2, s2.live, TriggerEmergency, "")
		if got, want := kept(ahead)+foreseen, kept(later); got > want || want-got > 90 {
			t.Errorf("window %d: ahead keeps %d tokens, with the %d foreseen %d; the plan after the growth keeps %d: want the same within a turn (90)",
				window, kept(ahead), foreseen, got, want)
		}
		if kept(ahead) >= kept(now) {
			t.Errorf("window %d: ahead keeps %d tokens, no fewer than the plan that foresees nothing (%d)", window, kept(ahead), kept(now))
		}
		if ahead.SummaryBudget != now.SummaryBudget {
			t.Errorf("window %d: the summary's budget gave way to what is foreseen: %d, want %d", window, ahead.SummaryBudget, now.SummaryBudget)
		}
	}
}
