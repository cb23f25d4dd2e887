package tick

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
)

// answered is what an answer tick found before it ran: the context with the
// observation posted and unread, and whether it fitted the window.
type answered struct {
	obsID      int64
	total      int // context tokens with the unread observation
	rest       int // the same without what masking the observation saves
	over, fits bool
	res        *Result
}

// answerRounds asks brom to look around, round after round, posts room as
// each observation and ticks, calling found with what each answer tick
// found, until found returns true or rounds run out.
func answerRounds(t *testing.T, env *testEnv, rounds int, room string, found func(a answered) bool) bool {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < rounds; i++ {
		res := tickOnce(t, env, fmt.Sprintf("Round %d: can you look around for my sword?", i))
		for _, call := range res.Awaiting {
			if err := env.eng.PostToolResults(ctx, "brom", []ToolResult{{CallID: call, Content: room}}); err != nil {
				t.Fatal(err)
			}
			c, err := env.chars.Get(ctx, "brom")
			if err != nil {
				t.Fatal(err)
			}
			live, err := env.chars.LiveMessages(ctx, "brom")
			if err != nil {
				t.Fatal(err)
			}
			a := answered{total: c.ContextTokens()}
			a.rest = a.total - unreadExcess(live, c.Masking.Exempt)
			a.over, a.fits = c.OverEmergency(a.total), fitsWindow(c, a.total)
			for _, m := range live {
				if m.Role == llm.RoleTool && m.ToolCallID == call {
					a.obsID = m.ID
				}
			}
			if a.obsID == 0 {
				t.Fatal("the posted observation is not in the live history")
			}
			if a.res, err = env.eng.Tick(ctx, "brom"); err != nil {
				t.Fatal(err)
			}
			if a.res.Usage.PromptTokens+c.MaxOutputTokens > c.ContextWindow {
				t.Fatalf("a prompt of %d tokens was sent with a %d-token reply reserve in a %d-token window",
					a.res.Usage.PromptTokens, c.MaxOutputTokens, c.ContextWindow)
			}
			if found(a) {
				return true
			}
		}
	}
	return false
}

// forgeObservation is a look observation of about 480 tokens, which alone
// takes a 2,048-token context from under the sleep threshold to over the
// emergency one.
var forgeObservation = strings.Repeat("You see the forge: an anvil scarred by years of work, a quench tub of black water, tongs on the wall. ", 20)

// An observation that takes the context past the emergency threshold on its
// own, when the prompt still fits the window, is read before any
// compaction: no compaction that tick, the model gets it whole, and once
// read it is masked on the next tick, which needs no compaction either.
func TestUnreadObservationReadBeforeCompaction(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	c := putSmallWindowNPC(t, env)
	sleepMark := int(c.Compaction.SleepThreshold * float64(c.ContextWindow))
	if sleepMark == 0 {
		sleepMark = int(character.DefaultSleepThreshold * float64(c.ContextWindow))
	}
	var got answered
	ok := answerRounds(t, env, 40, forgeObservation, func(a answered) bool {
		if a.over && a.fits && a.rest < sleepMark {
			got = a
			return true
		}
		return false
	})
	if !ok {
		t.Fatal("no observation arrived over the emergency threshold with room to read it: the test proves nothing")
	}
	if got.res.Compaction != nil {
		t.Fatalf("compacted (%+v) before the model read an observation that fitted the window", got.res.Compaction)
	}
	if got.res.Usage.PromptTokens < got.total {
		t.Fatalf("prompt of %d tokens, under the %d of the context with the observation whole", got.res.Usage.PromptTokens, got.total)
	}
	res := tickOnce(t, env, "Thank you, Brom.")
	if res.Compaction != nil {
		t.Fatalf("the tick after the observation was read compacted: %+v", res.Compaction)
	}
	m, err := env.chars.MessageByID(ctx, "brom", got.obsID)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Masked {
		t.Fatal("the observation, read, was not masked on the next tick")
	}
	after, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if after.OverEmergency(after.ContextTokens()) {
		t.Fatalf("the context is still over the emergency threshold after masking: %d tokens", after.ContextTokens())
	}
}

// An unread observation whose prompt with the reply reserve does not fit
// the window is still compacted around before the model call.
func TestUnreadObservationThatDoesNotFitIsCompacted(t *testing.T) {
	env := newEnv(t)
	putSmallWindowNPC(t, env)
	var got answered
	ok := answerRounds(t, env, 40, forgeObservation, func(a answered) bool {
		if a.over && !a.fits {
			got = a
			return true
		}
		return false
	})
	if !ok {
		t.Fatal("no observation arrived too large to read without compacting: the test proves nothing")
	}
	if got.res.Compaction == nil || got.res.Compaction.Trigger != sleep.TriggerEmergency {
		t.Fatalf("no emergency compaction for a prompt of %d tokens: %+v", got.total, got.res.Compaction)
	}
}

// The rule itself: read first only when the prompt with the reply reserve
// fits the window and the context without the unread results' excess is
// under the sleep threshold; never with masking off, never for results
// already read or of exempt tools.
func TestMayReadFirst(t *testing.T) {
	npc := func(system int, live []character.Message) *character.Character {
		c := brom()
		c.ContextWindow, c.MaxOutputTokens = 1000, 100
		c.Compaction.SleepThreshold, c.Compaction.EmergencyThreshold = 0.7, 0.8
		on := true
		c.Masking.Enabled = &on
		c.State.SystemTokens = system
		for _, m := range live {
			c.State.LiveTokens += m.PromptTokens()
		}
		return c
	}
	msg := func(id int64, role, tool string, view, mask int) character.Message {
		return character.Message{ID: id, Role: role, ToolName: tool, Tokens: view, ViewTokens: view, MaskTokens: mask}
	}
	unread := []character.Message{
		msg(1, llm.RoleUser, "", 20, 20),
		msg(2, llm.RoleAssistant, "", 20, 20),
		msg(3, llm.RoleTool, "look", 210, 10),
	}
	read := append(slices.Clone(unread), msg(4, llm.RoleAssistant, "", 20, 20))
	cases := []struct {
		name    string
		system  int
		live    []character.Message
		pending int
		exempt  bool
		off     bool
		want    bool
	}{
		// 600+250 = 850 ≥ 800, 850+100 ≤ 1000, 850−200 = 650 < 700.
		{name: "unread result alone over the threshold", system: 600, live: unread, want: true},
		// 680+250 = 930: 930−200 = 730, past the sleep threshold.
		{name: "rest past the sleep threshold", system: 680, live: unread},
		// The first case with a 160-token reply reserve: 850+160 > 1000.
		{name: "reply reserve does not fit", system: 600, live: unread},
		// 850+60 = 910: 910−200 = 710, past the sleep threshold.
		{name: "pending messages count", system: 600, live: unread, pending: 60},
		{name: "masking off", system: 600, live: unread, off: true},
		{name: "exempt tool", system: 600, live: unread, exempt: true},
		{name: "result already read", system: 560, live: read},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := npc(tc.system, tc.live)
			if tc.name == "reply reserve does not fit" {
				c.MaxOutputTokens = 160
			}
			if tc.off {
				off := false
				c.Masking.Enabled = &off
			}
			if tc.exempt {
				c.Masking.ExemptTools.V = []string{"look"}
			}
			if got := mayReadFirst(c, tc.live, tc.pending); got != tc.want {
				t.Fatalf("mayReadFirst = %v, want %v (context %d)", got, tc.want, c.ContextTokens()+tc.pending)
			}
		})
	}
}

// A tick that reads its unread results first and then takes another step
// whose prompt no longer fits the window compacts before that step: the
// summarizer runs between the two model calls of the tick.
func TestReadFirstStepThatOutgrowsTheWindowCompacts(t *testing.T) {
	f := newFakeProvider(t)
	var mu sync.Mutex
	var seq []string
	noteNext := false // the test sets it for the tick that reads first
	note := strings.Repeat("The forge is cold and the sword is not on the anvil; ", 45)
	f.set(func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
		if kind != "tick" {
			mu.Lock()
			seq = append(seq, kind)
			mu.Unlock()
			return chatty(kind, n, req)
		}
		last := req.Messages[len(req.Messages)-1]
		step := "say"
		mu.Lock()
		doNote := noteNext
		mu.Unlock()
		switch {
		case last.Role == "user" && strings.Contains(last.Content, "look around"):
			step = "look"
		case last.Role == "tool" && callName(req.Messages, last.ToolCallID) == "look" && doNote:
			step = "note"
		case last.Role == "tool":
			step = "end"
		}
		mu.Lock()
		seq = append(seq, step)
		mu.Unlock()
		call := func(name, args string) string {
			return completion(openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{{
				ID: fmt.Sprintf("%s_%d", name, n), Type: "function", Function: openai.FunctionCall{Name: name, Arguments: args}}}})
		}
		switch step {
		case "look":
			return 200, call("look", "{}"), 0
		case "note":
			return 200, call("journal_write", fmt.Sprintf(`{"type":"note","content":%q}`, note)), 0
		case "end":
			return 200, textCompletion(""), 0
		}
		return 200, sayCompletion(n, "Aye, I hear you."), 0
	})
	client, err := llm.NewClient(llm.ClientConfig{BaseURL: f.srv.URL + "/v1", Model: "gpt-4o-mini", MaxRetries: -1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	env := openEnvWith(t, filepath.Join(t.TempDir(), "npcd.db"), client, 0)
	ctx := context.Background()
	c := brom()
	c.Model = "gpt-4o-mini"
	c.ContextWindow, c.MaxOutputTokens = 2048, 204
	c.Tools.V = append(character.DefaultTools(), character.ToolSpec{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object"}, Returns: true})
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		if i%3 != 0 {
			tickOnce(t, env, fmt.Sprintf("Round %d: the north road is busy today.", i))
			continue
		}
		res := tickOnce(t, env, fmt.Sprintf("Round %d: can you look around for my sword?", i))
		for _, call := range res.Awaiting {
			if err := env.eng.PostToolResults(ctx, "brom", []ToolResult{{CallID: call, Content: forgeObservation}}); err != nil {
				t.Fatal(err)
			}
			stored, err := env.chars.Get(ctx, "brom")
			if err != nil {
				t.Fatal(err)
			}
			live, err := env.chars.LiveMessages(ctx, "brom")
			if err != nil {
				t.Fatal(err)
			}
			deferred := stored.OverEmergency(stored.ContextTokens()) && mayReadFirst(stored, live, 0)
			mu.Lock()
			seq, noteNext = nil, deferred
			mu.Unlock()
			res, err := env.eng.Tick(ctx, "brom")
			if err != nil {
				t.Fatal(err)
			}
			if !deferred {
				continue
			}
			mu.Lock()
			got := strings.Join(seq, " ")
			mu.Unlock()
			if got != "note summary end" {
				t.Fatalf("model calls of the tick that read first: %q, want the compaction between its two steps", got)
			}
			if res.Compaction == nil || res.Compaction.Trigger != sleep.TriggerEmergency {
				t.Fatalf("the tick reports no emergency compaction: %+v", res.Compaction)
			}
			return
		}
	}
	t.Fatal("no observation was read before compacting: the test proves nothing")
}

// callName returns the function name of the call with id in msgs, "" if
// none has it.
func callName(msgs []openai.ChatCompletionMessage, id string) string {
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			if tc.ID == id {
				return tc.Function.Name
			}
		}
	}
	return ""
}
