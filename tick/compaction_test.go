package tick

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
)

// genHistory drives one randomized NPC history: turns with nested tool
// chains and occasional huge tool outputs, interleaved with masking and
// compactions of every trigger, checking the invariants after each step.
type genHistory struct {
	t       *testing.T
	env     *testEnv
	rng     *rand.Rand
	c       *character.Character
	written map[int64]bool
	callSeq int
}

func (g *genHistory) words(n int) string {
	vocab := []string{"alice", "bob", "sword", "forge", "gold", "17", "coins", "promise", "the", "north", "road", "wolf", "ale", "inn", "key", "Oakvale", "quest", "repair", "tomorrow", "map"}
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocab[g.rng.IntN(len(vocab))])
	}
	return b.String()
}

func (g *genHistory) append(msgs ...*character.Message) {
	g.t.Helper()
	ctx := context.Background()
	counter := g.env.eng.Counter(g.c.Model)
	if err := g.env.chars.AppendMessages(ctx, g.c.ID, msgs, counter, g.c.Masking.OffloadBytes); err != nil {
		g.t.Fatal(err)
	}
	for _, m := range msgs {
		g.written[m.ID] = true
	}
}

// adopt takes after, the NPC as an operation says it left it, after
// checking that it is the NPC as stored.
func (g *genHistory) adopt(op string, after *character.Character) {
	g.t.Helper()
	stored, err := g.env.chars.Get(context.Background(), g.c.ID)
	if err != nil {
		g.t.Fatal(err)
	}
	if diff := cmp.Diff(stored, after); diff != "" {
		g.t.Fatalf("%s returned the NPC unlike it is stored (-stored +returned):\n%s", op, diff)
	}
	g.c = after
}

func (g *genHistory) reload() {
	g.t.Helper()
	c, err := g.env.chars.Get(context.Background(), g.c.ID)
	if err != nil {
		g.t.Fatal(err)
	}
	g.c = c
}

// turn appends one turn: a user message, 0–3 steps of tool calls with their
// results, and usually a final reply.
func (g *genHistory) turn() {
	ctx := context.Background()
	turn := g.c.State.Turn + 1
	if err := g.env.chars.UpdateState(ctx, g.c.ID, map[string]any{"turn": turn}); err != nil {
		g.t.Fatal(err)
	}
	g.append(&character.Message{Role: llm.RoleUser, Content: "[2026-11-21 10:00] alice says: " + g.words(5+g.rng.IntN(60)), Turn: turn,
		EventRefs: store.NewJSON([]string{fmt.Sprintf("evt-%d", turn)})})
	for step := g.rng.IntN(4); step > 0; step-- {
		var calls []character.ToolCall
		for n := 1 + g.rng.IntN(3); n > 0; n-- {
			g.callSeq++
			name := []string{"look", "inventory", "say", "memory_search"}[g.rng.IntN(4)]
			calls = append(calls, character.ToolCall{ID: fmt.Sprintf("call_%d", g.callSeq), Name: name, Args: `{"text":"` + g.words(3) + `"}`})
		}
		g.append(&character.Message{Role: llm.RoleAssistant, ToolCalls: store.NewJSON(calls), Turn: turn})
		var results []*character.Message
		for _, tc := range calls {
			content := g.words(1 + g.rng.IntN(40))
			if g.rng.IntN(10) == 0 { // a huge observation
				content = strings.Repeat(g.words(50)+"\n", 10+g.rng.IntN(40))
			}
			results = append(results, &character.Message{Role: llm.RoleTool, ToolCallID: tc.ID, ToolName: tc.Name, Content: content, Turn: turn})
		}
		g.append(results...)
	}
	if g.rng.IntN(4) > 0 {
		g.append(&character.Message{Role: llm.RoleAssistant, Content: g.words(3 + g.rng.IntN(30)), Turn: turn})
	}
	g.reload()
}

// check verifies the invariants that must hold after any operation; full
// adds the checks that read the whole history.
func (g *genHistory) check(op string, full bool) {
	g.t.Helper()
	ctx := context.Background()
	c := g.c
	// Running totals equal the rows.
	got, err := g.env.chars.Recount(ctx, c.ID)
	if err != nil {
		g.t.Fatal(err)
	}
	want := character.Totals{LiveTokens: c.State.LiveTokens, SummaryTokens: c.State.SummaryTokens, LiveMessages: c.State.LiveMessages, ArchivedMessages: c.State.ArchivedMessages}
	if got != want {
		g.t.Fatalf("after %s: running totals %+v, rows say %+v", op, want, got)
	}
	if !full {
		return
	}
	// (b) every message ever written is live or archived, exactly once.
	all, err := g.env.chars.History(ctx, c.ID, character.HistoryQuery{})
	if err != nil {
		g.t.Fatal(err)
	}
	seen := map[int64]bool{}
	summaries := 0
	for _, m := range all {
		if m.State != character.StateLive && m.State != character.StateArchived {
			g.t.Fatalf("after %s: message %d in state %q", op, m.ID, m.State)
		}
		if seen[m.ID] {
			g.t.Fatalf("after %s: message %d twice", op, m.ID)
		}
		seen[m.ID] = true
		if m.Summary && m.State == character.StateLive {
			summaries++
		}
	}
	for id := range g.written {
		if !seen[id] {
			g.t.Fatalf("after %s: message %d was lost", op, id)
		}
	}
	if summaries > 1 {
		g.t.Fatalf("after %s: %d live summaries", op, summaries)
	}
	// (a) what is sent pairs every call with its result.
	live, err := g.env.chars.LiveMessages(ctx, c.ID)
	if err != nil {
		g.t.Fatal(err)
	}
	sent := assemble(SystemPrompt(c), live, "", nil)
	if err := checkPairs(sent); err != nil {
		g.t.Fatalf("after %s: %v", op, err)
	}
}

// checkFits verifies (d): at send time, after the tick's budget step, the
// prompt and the answer fit the window.
func (g *genHistory) checkFits(op string) {
	g.t.Helper()
	live, err := g.env.chars.LiveMessages(context.Background(), g.c.ID)
	if err != nil {
		g.t.Fatal(err)
	}
	c := g.c
	sent := assemble(SystemPrompt(c), live, "", nil)
	counter := g.env.eng.Counter(c.Model)
	if n := counter.Messages(sent) + c.State.ToolTokens + c.MaxOutputTokens; n > c.ContextWindow {
		var desc []string
		for _, m := range live {
			desc = append(desc, fmt.Sprintf("%d:%s t%d tok%d/%d/%d m%v", m.ID, m.Role, m.Turn, m.Tokens, m.ViewTokens, m.MaskTokens, m.Masked))
		}
		g.t.Fatalf("after %s: prompt of %d tokens (with output) over window %d; state %+v; live %v", op, n, c.ContextWindow, c.State, desc)
	}
}

// checkPairs reports a tool result without its call or a call without its
// result, the way providers reject them.
func checkPairs(ms []llm.Message) error {
	open := map[string]bool{}
	for i, m := range ms {
		switch {
		case m.Role == llm.RoleTool:
			if !open[m.ToolCallID] {
				return fmt.Errorf("message %d: tool result %q without its call", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		default:
			if len(open) > 0 {
				return fmt.Errorf("message %d: calls %v without results", i, open)
			}
			for _, tc := range m.ToolCalls {
				open[tc.ID] = true
			}
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("calls %v without results at the end", open)
	}
	return nil
}

func TestCompactionInvariantsRandomized(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	comp := env.eng.deps.Compactor.(*sleep.Compactor)
	histories := 30
	compactions := 0
	for h := 0; h < histories; h++ {
		rng := rand.New(rand.NewPCG(uint64(h), 7))
		on := rng.IntN(4) > 0
		c := &character.Character{ID: fmt.Sprintf("npc-%d", h), Name: "Brom", Persona: "You are Brom, the gruff blacksmith.",
			ContextWindow: []int{2048, 4096, 8192}[rng.IntN(3)], MaxOutputTokens: 256,
			Compaction: character.CompactionSettings{PreserveRecentMessages: []int{4, 10, 20}[rng.IntN(3)], PreserveRatio: []float64{0.1, 0.2, 0.3}[rng.IntN(3)]},
			Masking:    character.MaskingSettings{Enabled: &on, KeepRecentTurns: []int{1, 3, 10}[rng.IntN(3)]}}
		if rng.IntN(3) == 0 {
			c.Masking.ExemptTools = store.NewJSON([]string{"inventory"})
		}
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
		g := &genHistory{t: t, env: env, rng: rng, c: c, written: map[int64]bool{}}
		g.reload()
		for turns := 10 + rng.IntN(40); turns > 0; turns-- {
			g.turn()
			// Ticks mask by policy and compact in an emergency.
			if g.c.Masking.On() {
				after, err := comp.Mask(ctx, g.c, false)
				if err != nil {
					t.Fatal(err)
				}
				g.adopt("mask", after)
				g.check("mask", false)
			}
			trigger := ""
			switch {
			case g.c.Utilization() >= g.c.Compaction.EmergencyThreshold:
				after, err := comp.Mask(ctx, g.c, true)
				if err != nil {
					t.Fatal(err)
				}
				g.adopt("aggressive mask", after)
				if g.c.Utilization() >= g.c.Compaction.EmergencyThreshold {
					trigger = sleep.TriggerEmergency
				}
			case g.c.Utilization() >= g.c.Compaction.SleepThreshold && rng.IntN(3) == 0:
				trigger = sleep.TriggerSleep
			case rng.IntN(25) == 0:
				trigger = sleep.TriggerManual
			}
			if trigger == "" {
				g.checkFits("budget check")
				continue
			}
			rec, after, err := comp.Compact(ctx, g.c, trigger, "")
			if err != nil {
				t.Fatalf("history %d: compact: %v", h, err)
			}
			g.adopt("compact "+trigger, after)
			g.check("compact "+trigger, true)
			g.checkFits("compact " + trigger)
			if rec == nil {
				continue
			}
			compactions++
			// (c) the kept history is under the target, or is the newest
			// turn alone with its outputs masked.
			live, err := env.chars.LiveMessages(ctx, g.c.ID)
			if err != nil {
				t.Fatal(err)
			}
			target := sleep.LimitsFor(g.c, sleep.SummaryBudgetFor(g.c)).TargetTokens
			if g.c.State.LiveTokens > target {
				for _, m := range live[1:] {
					if m.Turn != g.c.State.Turn {
						t.Fatalf("history %d: after %s compaction live tokens %d over target %d with older turns kept", h, trigger, g.c.State.LiveTokens, target)
					}
				}
			}
			if !live[0].Summary {
				t.Fatalf("history %d: no summary at the head after compaction", h)
			}
		}
	}
	if compactions < histories {
		t.Fatalf("only %d compactions over %d histories: the generator does not exercise compaction", compactions, histories)
	}
	t.Logf("%d histories, %d compactions", histories, compactions)
}

// An emergency compaction brings the context down to its target, so the
// next one is many ticks away; when the target cannot be reached the NPC's
// warnings say why, until a compaction reaches it again.
func TestCompactionReachesItsTarget(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	run := func(c *character.Character, ticks int) (recs []*Compaction, last *Result) {
		t.Helper()
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < ticks; i++ {
			text := fmt.Sprintf("Round %d: the north road is busy, and the miller's cart lost a wheel by the bridge again.", i)
			if _, _, err := env.eng.PostEvents(ctx, c.ID, []EventInput{{Kind: "say", Actor: "alice", Text: text}}); err != nil {
				t.Fatal(err)
			}
			res, err := env.eng.Tick(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if res.Compaction != nil {
				recs = append(recs, res.Compaction)
			}
			last = res
		}
		return recs, last
	}

	c := brom()
	c.ContextWindow, c.MaxOutputTokens = 4096, 256
	recs, last := run(c, 120)
	if len(recs) < 2 {
		t.Fatalf("%d compactions: the run does not exercise compaction", len(recs))
	}
	stored, err := env.chars.Get(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	target := sleep.TargetTokens(stored)
	for _, r := range recs {
		if r.TokensAfter > target {
			t.Errorf("compaction %d left %d tokens, over the target of %d", r.ID, r.TokensAfter, target)
		}
	}
	for _, w := range last.Warnings {
		if strings.Contains(w, "over its target") {
			t.Errorf("warning although every compaction reached its target: %q", w)
		}
	}

	// In a small window the newest turn takes more than the target leaves
	// beside the fixed part and a full summary: the summary gives way.
	small := brom()
	small.ID = "smallwindow"
	small.ContextWindow, small.MaxOutputTokens = 2048, 204
	recs, _ = run(small, 60)
	if len(recs) < 2 {
		t.Fatalf("%d compactions at 2048: the run does not exercise compaction", len(recs))
	}
	for _, r := range recs {
		if r.TokensAfter > 1024 {
			t.Errorf("compaction %d at 2048 left %d tokens, over the target of 1024", r.ID, r.TokensAfter)
		}
	}

	// A persona this long fits under the sleep threshold (PutNPC accepts
	// it) but leaves no room under the target at all.
	big := brom()
	big.ID = "orator"
	big.Persona += strings.Repeat(" Brom tells long stories about the old war, the siege of Harrowgate and the forty bells.", 75)
	big.ContextWindow, big.MaxOutputTokens = 4096, 128
	recs, last = run(big, 40)
	if len(recs) == 0 {
		t.Fatal("no compaction for the long persona")
	}
	found := false
	for _, w := range last.Warnings {
		found = found || strings.Contains(w, "over its target") && strings.Contains(w, "persona")
	}
	if !found {
		t.Fatalf("warnings %q do not say why the target was missed", last.Warnings)
	}
	missed, err := env.eng.deps.Compactor.(*sleep.Compactor).Records(ctx, "orator")
	if err != nil || len(missed) == 0 || missed[len(missed)-1].Metadata.V["target_missed"] == nil {
		t.Fatalf("the compaction record does not note the missed target: %+v %v", missed, err)
	}
}

// An observation that arrives when the context is nearly full is compacted
// around, not masked unread: the model reads it whole, the compaction says
// why it missed its target, the next tick needs no compaction, and once
// read the observation is masked as the context fills again.
func TestCompactionKeepsAnUnreadObservationWhole(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	c := putSmallWindowNPC(t, env)
	room := strings.Repeat("You see the forge: an anvil scarred by years of work, a quench tub of black water, tongs on the wall. ", 14)
	var resumed *Result
	var obsID int64
	for i := 0; i < 30 && resumed == nil; i++ {
		res := tickOnce(t, env, fmt.Sprintf("Round %d: can you look around for my sword?", i))
		for _, call := range res.Awaiting {
			next := answerOnce(t, env, call, room)
			if next.Compaction != nil {
				resumed = next
				live, err := env.chars.LiveMessages(ctx, c.ID)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range live {
					if m.Role == llm.RoleTool && m.ToolCallID == call {
						obsID = m.ID
						if m.Masked {
							t.Fatal("the observation the model had not read was masked by the compaction")
						}
					}
				}
			}
		}
	}
	if resumed == nil || obsID == 0 {
		t.Fatal("no compaction when an observation arrived: the test proves nothing")
	}
	found := false
	for _, w := range resumed.Warnings {
		found = found || strings.Contains(w, "not read yet")
	}
	if !found {
		t.Fatalf("warnings %q do not say why the target was missed", resumed.Warnings)
	}
	res := tickOnce(t, env, "Thank you, Brom.")
	if res.Compaction != nil {
		t.Fatalf("a second compaction right after the first: %+v", res.Compaction)
	}
	for i := 0; i < 10; i++ {
		live, err := env.chars.LiveMessages(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range live {
			if m.ID == obsID && m.Masked {
				return
			}
		}
		tickOnce(t, env, fmt.Sprintf("Round %d: the north road is busy today.", i))
	}
	t.Fatal("the observation, read, is still not masked ten ticks later")
}

// answerOnce posts content as the result of brom's tool call and ticks.
func answerOnce(t *testing.T, env *testEnv, call, content string) *Result {
	t.Helper()
	ctx := context.Background()
	if err := env.eng.PostToolResults(ctx, "brom", []ToolResult{{CallID: call, Content: content}}); err != nil {
		t.Fatal(err)
	}
	res, err := env.eng.Tick(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// putSmallWindowNPC stores brom with a 2,048-token window and a look tool
// whose result the model waits for, and returns it.
func putSmallWindowNPC(t *testing.T, env *testEnv) *character.Character {
	t.Helper()
	c := brom()
	c.ContextWindow, c.MaxOutputTokens = 2048, 204
	c.Tools.V = append(character.DefaultTools(), character.ToolSpec{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object"}, Returns: true})
	if _, err := env.eng.PutNPC(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// A compaction's summary message is written with its metadata whole: the
// compaction's id, the span it stands for and its own token count. The
// NPC's running totals, written once with the archiving and the summary,
// match a recount of its rows.
func TestCompactionSummaryCarriesItsMetadata(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	askAndTick(t, env, "brom", "", 30)
	rec, err := env.eng.Compact(ctx, "brom", "")
	if err != nil || rec == nil {
		t.Fatalf("compact: %v %v", rec, err)
	}
	sum, err := env.chars.MessageByID(ctx, "brom", rec.SummaryMessageID)
	if err != nil {
		t.Fatal(err)
	}
	meta := sum.Metadata.V
	want := map[string]float64{"compaction_id": float64(rec.ID), "summary_token_count": float64(sum.Tokens),
		"compacted_count": float64(rec.MessagesCompacted), "first_source_message_id": float64(rec.FirstMessageID),
		"last_source_message_id": float64(rec.LastMessageID)}
	for k, v := range want {
		if meta[k] != v {
			t.Errorf("summary metadata %s = %v, want %v", k, meta[k], v)
		}
	}
	if sum.Tokens <= 0 || !sum.Summary || sum.State != character.StateLive {
		t.Fatalf("summary message %+v", sum)
	}
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	got := character.Totals{LiveTokens: c.State.LiveTokens, SummaryTokens: c.State.SummaryTokens, LiveMessages: c.State.LiveMessages, ArchivedMessages: c.State.ArchivedMessages}
	recount, err := env.chars.Recount(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if got != recount || got.ArchivedMessages != rec.MessagesCompacted || c.State.Compactions != 1 {
		t.Fatalf("totals %+v after %d archived, a recount finds %+v; compactions %d", got, rec.MessagesCompacted, recount, c.State.Compactions)
	}
}

// askAndTick posts n questions to NPC id, labelled with label, and ticks
// it after each.
func askAndTick(tb testing.TB, env *testEnv, id, label string, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		ev := EventInput{Kind: "say", Actor: "alice", Text: fmt.Sprintf("Round %s%d: have you seen my sword?", label, i)}
		if _, _, err := env.eng.PostEvents(ctx, id, []EventInput{ev}); err != nil {
			tb.Fatal(err)
		}
		if _, err := env.eng.Tick(ctx, id); err != nil {
			tb.Fatal(err)
		}
	}
}
