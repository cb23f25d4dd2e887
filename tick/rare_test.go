package tick

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
)

// Many ticks in a 2,048-token window with the builtin model, a game tool's
// observation every third turn: emergency compactions stay rare (masking
// what the model has read makes room first), each one ends at its target
// unless the observation the model has not read yet is why (and then says
// so), and every tool call keeps its result.
func TestEmergencyCompactionsStayRareInASmallWindow(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	c := putSmallWindowNPC(t, env)
	room := strings.Repeat("A forge, an anvil, a quench tub, tongs on the wall. ", 12)
	ticks, emergencies := 0, 0
	check := func(res *Result) {
		t.Helper()
		ticks++
		cp := res.Compaction
		if cp == nil {
			return
		}
		if cp.Trigger == sleep.TriggerEmergency {
			emergencies++
		}
		if cp.TokensAfter > 1024 && !strings.Contains(strings.Join(res.Warnings, " "), "not read yet") {
			t.Errorf("tick %d: compaction left %d tokens, over the target of 1024, and warnings %q do not say why", res.Tick, cp.TokensAfter, res.Warnings)
		}
	}
	for i := 0; i < 120; i++ {
		text := fmt.Sprintf("Round %d: the north road is busy today.", i)
		if i%3 == 0 {
			text = fmt.Sprintf("Round %d: can you look around for my sword?", i)
		}
		res := tickOnce(t, env, text)
		check(res)
		for _, call := range res.Awaiting {
			check(answerOnce(t, env, call, room))
		}
	}
	t.Logf("%d emergency compactions in %d ticks", emergencies, ticks)
	if emergencies == 0 {
		t.Fatal("no compaction: the run does not exercise it")
	}
	// The rate this traffic reaches today (one tick in six or fewer; it
	// was one in four before masking made room first): a regression bound,
	// not the goal of one in ten, which the fixed prompt and a 250-token
	// observation every third turn leave out of reach at this window.
	if emergencies*6 > ticks {
		t.Errorf("%d emergency compactions in %d ticks: more than one in six", emergencies, ticks)
	}
	// Every call has its results right after it, each call one result,
	// through the whole history, archived and live, in order.
	all, err := env.chars.History(ctx, c.ID, character.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var open map[string]bool
	for _, m := range all {
		switch {
		case m.Summary:
			continue
		case m.Role == llm.RoleTool:
			if !open[m.ToolCallID] {
				t.Fatalf("message %d: a result of call %s, which is not awaiting one", m.ID, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 && m.Role == llm.RoleAssistant {
			t.Fatalf("message %d: calls %v left without results", m.ID, open)
		}
		if len(open) > 0 && m.Role == llm.RoleUser {
			t.Fatalf("message %d: calls %v left without results", m.ID, open)
		}
		open = map[string]bool{}
		for _, tc := range m.ToolCalls.V {
			open[tc.ID] = true
		}
	}
}
