package tick

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
)

func TestNearEmergency(t *testing.T) {
	c := brom()
	c.ContextWindow = 1000
	c.ApplyDefaults() // sleep 0.70, emergency 0.80
	for _, tc := range []struct {
		used, grew int
		want       bool
	}{
		{750, 60, true},   // the next tick like this one reaches 800
		{750, 40, false},  // it would not
		{650, 200, false}, // below the sleep threshold: a sleep's to compact
		{790, 0, false},   // a tick that added nothing foresees nothing
		{790, -30, false}, // nor one that masked more than it added
		{700, 100, true},  // from the sleep threshold on
	} {
		if got := nearEmergency(c, tc.used, tc.grew); got != tc.want {
			t.Errorf("nearEmergency(used %d, grew %d) = %v, want %v", tc.used, tc.grew, got, tc.want)
		}
	}
}

func TestReadExcessCountsOnlyWhatTheModelRead(t *testing.T) {
	c := brom()
	c.ApplyDefaults()
	result := func(id int64, view, mask int) character.Message {
		return character.Message{ID: id, Role: llm.RoleTool, ToolName: "look", ViewTokens: view, MaskTokens: mask}
	}
	live := []character.Message{
		{Role: llm.RoleUser},
		{Role: llm.RoleAssistant},
		result(3, 500, 20), // read: an assistant message follows
		{Role: llm.RoleAssistant},
		{Role: llm.RoleUser},
		{Role: llm.RoleAssistant},
		result(7, 300, 20), // not read yet
	}
	if got := readExcess(c, live); got != 480 {
		t.Fatalf("readExcess = %d, want 480 (the read result's view less its placeholder)", got)
	}
	off := false
	c.Masking.Enabled = &off
	if got := readExcess(c, live); got != 0 {
		t.Fatalf("readExcess with masking off = %d, want 0: nothing will mask them", got)
	}
}

// records returns brom's compactions, oldest first.
func records(t *testing.T, env *testEnv) []sleep.Record {
	t.Helper()
	recs, err := env.eng.deps.Compactor.(*sleep.Compactor).Records(context.Background(), "brom")
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// checkStored checks brom's stored history after compactions: every row
// live or archived by a compaction, running totals equal to a recount, and
// the live history a prompt a provider accepts (every call with its result).
func checkStored(t *testing.T, env *testEnv) {
	t.Helper()
	ctx := context.Background()
	all, err := env.chars.History(ctx, "brom", character.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.State != character.StateLive && m.CompactionID == nil {
			t.Fatalf("message %d is %s without a compaction", m.ID, m.State)
		}
	}
	live, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	var prompt []llm.Message
	for i := range live {
		prompt = append(prompt, live[i].Prompt())
	}
	if err := checkPairs(prompt); err != nil {
		t.Fatal(err)
	}
	totals, err := env.chars.Recount(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if totals.LiveTokens != c.State.LiveTokens || totals.LiveMessages != c.State.LiveMessages || totals.SummaryTokens != c.State.SummaryTokens {
		t.Fatalf("running totals drifted: state %+v, recount %+v", c.State, totals)
	}
}

// With background compaction on, a conversation that fills brom's context
// again and again is compacted beside its ticks: no tick compacts (none
// waits for a summary), each compaction ends at its target, and nothing is
// lost. With it off, the same conversation makes the ticks compact.
func TestBackgroundCompactionSparesTheTicks(t *testing.T) {
	run := func(background bool) (inTick int, recs []sleep.Record, env *testEnv) {
		env = newEnv(t)
		env.eng.cfg.BackgroundCompaction = background
		ctx := context.Background()
		c := brom()
		c.ContextWindow = 2048
		c.MaxOutputTokens = 204
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 60; i++ {
			res := tickOnce(t, env, fmt.Sprintf("Round %d: the north road is busy today, and the miller's cart lost a wheel again.", i))
			if res.Compaction != nil {
				inTick++
			}
			// The next tick of a game comes seconds later: the compaction
			// begun beside this one has ended by then.
			<-env.eng.Compacting("brom")
		}
		return inTick, records(t, env), env
	}
	inTick, recs, env := run(true)
	if inTick != 0 {
		t.Errorf("%d ticks compacted with background compaction on, want none", inTick)
	}
	if len(recs) < 2 {
		t.Fatalf("%d compactions in 60 ticks at a 2,048-token window, want several", len(recs))
	}
	c, err := env.chars.Get(context.Background(), "brom")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Trigger != sleep.TriggerBackground {
			t.Errorf("compaction %d: trigger %q, want %q", r.ID, r.Trigger, sleep.TriggerBackground)
		}
		if r.TokensAfter > sleep.TargetTokens(c) {
			t.Errorf("compaction %d ended at %d tokens, over its target %d", r.ID, r.TokensAfter, sleep.TargetTokens(c))
		}
	}
	checkStored(t, env)

	offInTick, offRecs, _ := run(false)
	if offInTick == 0 || offInTick != len(offRecs) {
		t.Fatalf("background compaction off: %d ticks compacted, %d compactions; want every compaction inside a tick", offInTick, len(offRecs))
	}
}

// slowSummaries is an engine with background compaction on whose NPC brom
// uses a remote model; once armed, each summary is asked for (started) and
// then held until release is closed (at the latest when the test ends). It
// starts from a compacted context, so that the ticks that follow stay below
// the emergency threshold until a compaction begins beside them.
type slowSummaries struct {
	env      *testEnv
	f        *fakeProvider
	armed    atomic.Bool
	overflow atomic.Bool // the next tick call answers that the context overflowed
	note     atomic.Bool // the next tick call writes a long note (a further step follows)
	started  chan struct{}
	release  chan struct{}
	// before and summaries are the compactions stored and the summaries
	// asked for when begin began.
	before, summaries int
}

func newSlowSummaries(t *testing.T) *slowSummaries {
	t.Helper()
	s := &slowSummaries{f: newFakeProvider(t), started: make(chan struct{}, 1), release: make(chan struct{})}
	s.f.set(func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
		if kind == "summary" && s.armed.Load() {
			select {
			case s.started <- struct{}{}:
			default:
			}
			<-s.release
		}
		if kind == "tick" && s.overflow.CompareAndSwap(true, false) {
			return 400, overflowBody, 0
		}
		if kind == "tick" && s.note.CompareAndSwap(true, false) {
			return 200, completion(openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{{
				ID: fmt.Sprintf("note_%d", n), Type: "function", Function: openai.FunctionCall{Name: "journal_write",
					Arguments: fmt.Sprintf(`{"type":"note","content":%q}`, strings.Repeat("The forge is cold and the sword is not on the anvil; ", 37))}}}}), 0
		}
		return chatty(kind, n, req)
	})
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
	})
	s.env, _ = remoteEnvFrom(t, s.f, 30*time.Second)
	s.env.eng.cfg.BackgroundCompaction = true
	if _, err := s.env.eng.Compact(context.Background(), "brom", ""); err != nil {
		t.Fatal(err)
	}
	return s
}

// A tick that needs the compaction while the one begun beside the ticks is
// still writing its summary, its prompt not fitting the window without it,
// waits for that summary and commits it: the span is summarized once, and
// the tick reports the compaction.
func TestTickFinishesTheBackgroundCompaction(t *testing.T) {
	s := newSlowSummaries(t)
	s.begin(t, nil)
	// A long tale takes the prompt past the window's room for the reply:
	// the tick must compact, and the background compaction is writing its
	// summary.
	res := s.tickWaiting(t, longTale, nil)
	if res.Compaction == nil || res.Compaction.Trigger != sleep.TriggerBackground {
		t.Fatalf("the tick reported compaction %+v, want the one begun beside the ticks, finished by the tick", res.Compaction)
	}
	s.checkOne(t)
}

// A compaction begun beside the ticks whose summary is being written when
// the NPC is deleted and created again commits nothing into the new life:
// its commit finds the NPC it planned gone, and the rows it planned are
// not the new life's.
func TestBackgroundCompactionOverlappingARecreateCommitsNothing(t *testing.T) {
	s := newSlowSummaries(t)
	env := s.env
	ctx := context.Background()
	s.begin(t, nil)
	recreate(t, env)
	close(s.release)
	<-env.eng.Compacting("brom")
	if n := s.f.count("summary") - s.summaries; n != 1 {
		t.Fatalf("%d summaries written, want the one of the earlier life", n)
	}
	if left := rowsOf(t, env.eng.deps.DB, "brom"); left["compactions"] != 0 {
		t.Fatalf("the new life holds %v, want no compaction", left)
	}
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if c.State.Compactions != 0 || c.State.ArchivedMessages != 0 || c.State.SummaryTokens != 0 {
		t.Fatalf("the new life's state %+v, want no compaction, nothing archived and no summary", c.State)
	}
	ms, err := env.chars.History(ctx, "brom", character.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || !strings.Contains(ms[0].Content, "new in town") {
		t.Fatalf("the new life's history begins with %+v, want its own first event", ms)
	}
	for _, m := range ms {
		if m.Summary || m.State != character.StateLive {
			t.Fatalf("the new life holds %+v, want only its own live messages", m)
		}
	}
	checkStored(t, env)
}

// A tick that the provider tells its context overflowed while a compaction
// begun beside the ticks is writing its summary finishes that compaction
// (its recovery), instead of summarizing the same span again, then retries.
func TestOverflowFinishesTheBackgroundCompaction(t *testing.T) {
	s := newSlowSummaries(t)
	// Short tales fill the context to 60% of the window; then one long tale
	// leaves it past the sleep threshold, far enough under the emergency one
	// that the next tick does not compact before its model call, and grows
	// it so much that a compaction begins beside the ticks.
	s.begin(t, func(i int, c *character.Character) string {
		if c.ContextTokens() >= c.ContextWindow*6/10 {
			return longTale
		}
		return fmt.Sprintf("Tale %d: the north road is long.", i)
	})
	c, err := s.env.chars.Get(context.Background(), "brom")
	if err != nil {
		t.Fatal(err)
	}
	if c.OverEmergency(c.ContextTokens() + 100) {
		t.Fatalf("the context (%d tokens) is at the emergency threshold: the tick would compact before its model call", c.ContextTokens())
	}
	s.overflow.Store(true)
	ticks := s.f.count("tick")
	res := s.tickWaiting(t, "Hm?", nil)
	if res.Recovery != RecoveryCompacted {
		t.Fatalf("recovery %q, want %q", res.Recovery, RecoveryCompacted)
	}
	if res.Compaction == nil || res.Compaction.Trigger != sleep.TriggerBackground {
		t.Fatalf("the tick reported compaction %+v, want the one begun beside the ticks, finished by the overflow's recovery", res.Compaction)
	}
	if n := s.f.count("tick") - ticks; n != 2 {
		t.Fatalf("%d tick calls, want 2: the overflow, then the retry", n)
	}
	s.checkOne(t)
}

// longTale is a line of about 480 tokens.
var longTale = strings.Repeat("The north road is long, the bridge at the ford is down and the wolves are hungry this winter. ", 20)

// A tick over the emergency threshold while a compaction begun beside the
// ticks is writing its summary, its prompt still fitting the window, does
// not wait for that summary: it ticks, and the compaction lands after it,
// summarized once, with the tick's messages kept live.
func TestTickRidesTheBackgroundCompaction(t *testing.T) {
	s := newSlowSummaries(t)
	env := s.env
	ctx := context.Background()
	s.begin(t, nil)
	env.eng.handingOver = func() { t.Error("the tick waited for the summary being written") }
	// The next tick like the last reaches the emergency threshold.
	res := tickOnce(t, env, "One more tale: the north road is long and the wolves are hungry this winter.")
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if !c.OverEmergency(c.ContextTokens()) {
		t.Fatalf("the tick left %d tokens, under the emergency threshold: it proves nothing", c.ContextTokens())
	}
	if res.Compaction != nil {
		t.Fatalf("the tick compacted (%+v) instead of leaving it to the compaction under way", res.Compaction)
	}
	live, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	newest := live[len(live)-1].ID
	close(s.release)
	<-env.eng.Compacting("brom")
	env.eng.handingOver = nil
	s.checkOne(t)
	after, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if after[len(after)-1].ID != newest {
		t.Fatalf("the newest live message is %d after the compaction, want the tick's %d kept live", after[len(after)-1].ID, newest)
	}
	if c, err = env.chars.Get(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	if c.OverEmergency(c.ContextTokens()) {
		t.Fatalf("the compaction left %d tokens, over the emergency threshold", c.ContextTokens())
	}
}

// A tick that rides the compaction under way beside the ticks and whose
// turn then outgrows the window finishes that compaction before its next
// step (fitStep, handOver): the summary is written once, and the step's
// prompt fits.
func TestRidingTickThatOutgrowsTheWindowFinishesTheCompaction(t *testing.T) {
	s := newSlowSummaries(t)
	s.begin(t, nil)
	// The model writes a note of ~450 tokens first: the prompt of its next
	// step no longer fits the window.
	s.note.Store(true)
	ticks := s.f.count("tick")
	res := s.tickWaiting(t, "One more tale: the north road is long and the wolves are hungry this winter.", func() {
		if n := s.f.count("tick") - ticks; n != 1 {
			t.Errorf("%d tick calls before the tick waited, want 1: it rides the compaction under way, then waits before its second step", n)
		}
	})
	if res.Compaction == nil || res.Compaction.Trigger != sleep.TriggerBackground {
		t.Fatalf("the tick reported compaction %+v, want the one begun beside the ticks", res.Compaction)
	}
	if res.InvalidCalls != 0 || res.Usage.LLMCalls != 2 {
		t.Fatalf("%d invalid calls, %d model calls: want the note written, then the step after it", res.InvalidCalls, res.Usage.LLMCalls)
	}
	s.checkOne(t)
}

// A tick that finds the summary of a compaction begun beside the ticks
// written, its run waiting for the NPC's lock to commit it, commits it
// first (landWritten), without waiting and whatever its context: the run
// then commits nothing, and the compaction is stored once.
func TestTickLandsAWrittenCompaction(t *testing.T) {
	s := newSlowSummaries(t)
	env := s.env
	ctx := context.Background()
	s.begin(t, nil)
	v, ok := env.eng.compacting.Load("brom")
	if !ok {
		t.Fatal("no compaction under way")
	}
	run := v.(*besideRun)
	var ts *turnState
	err := env.eng.withNPC(ctx, "brom", func(ctx context.Context) error {
		close(s.release)
		<-run.ready // the summary is written; the run waits for this lock
		c, err := env.chars.Get(ctx, "brom")
		if err != nil {
			return err
		}
		if c.OverEmergency(c.ContextTokens()) {
			t.Errorf("the context (%d tokens) is at the emergency threshold: landing it proves nothing", c.ContextTokens())
		}
		ts = &turnState{c: c}
		return env.eng.landWritten(ctx, ts)
	})
	if err != nil {
		t.Fatal(err)
	}
	<-env.eng.Compacting("brom")
	if ts.comp == nil || ts.comp.Trigger != sleep.TriggerBackground {
		t.Fatalf("the tick landed %+v, want the compaction begun beside the ticks", ts.comp)
	}
	stored, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if ts.c.ContextTokens() != stored.ContextTokens() || ts.c.State.Compactions != stored.State.Compactions {
		t.Fatalf("the tick holds the NPC at %d tokens, %d compactions; stored: %d, %d", ts.c.ContextTokens(), ts.c.State.Compactions, stored.ContextTokens(), stored.State.Compactions)
	}
	s.checkOne(t) // the run did not commit the compaction the tick landed
}

func TestRides(t *testing.T) {
	env := newEnv(t)
	born := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	c := brom()
	c.ContextWindow, c.MaxOutputTokens, c.CreatedAt = 1000, 100, born
	c.ApplyDefaults()
	c.State.LiveTokens = 850 // over the emergency threshold (800)
	written := make(chan struct{})
	close(written)
	for _, tc := range []struct {
		name    string
		run     *besideRun // nil: none under way
		pending int
		want    bool
	}{
		{"none under way", nil, 0, false},
		{"summary being written, the prompt fits", &besideRun{c: c, ready: make(chan struct{})}, 40, true},
		{"the prompt with the reply reserve would not fit", &besideRun{c: c, ready: make(chan struct{})}, 60, false},
		{"taken over by a tick", &besideRun{c: c, ready: make(chan struct{}), taken: true}, 0, false},
		{"summary written: committed at once instead", &besideRun{c: c, ready: written}, 0, false},
		{"of a life of the NPC that is gone", &besideRun{c: &character.Character{ID: "brom", CreatedAt: born.Add(-time.Hour)}, ready: make(chan struct{})}, 0, false},
	} {
		env.eng.compacting.Delete("brom")
		if tc.run != nil {
			env.eng.compacting.Store("brom", tc.run)
		}
		if got := env.eng.rides(c, tc.pending); got != tc.want {
			t.Errorf("%s: rides = %v, want %v", tc.name, got, tc.want)
		}
	}
	env.eng.compacting.Delete("brom")
}

// begin arms the held summaries and ticks brom, each line given by tale
// (nil: a tale of one length each tick), until a compaction begins beside
// the ticks and asks for its summary. No tick may compact before. It notes
// the compactions and summaries so far, for checkOne.
func (s *slowSummaries) begin(t *testing.T, tale func(i int, c *character.Character) string) {
	t.Helper()
	s.before, s.summaries = len(records(t, s.env)), s.f.count("summary")
	s.armed.Store(true)
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatal("no compaction began beside the ticks")
		}
		line := fmt.Sprintf("Tale %d: the north road is long and the wolves are hungry this winter.", i)
		if tale != nil {
			c, err := s.env.chars.Get(context.Background(), "brom")
			if err != nil {
				t.Fatal(err)
			}
			line = tale(i, c)
		}
		if res := tickOnce(t, s.env, line); res.Compaction != nil {
			t.Fatalf("tick %d compacted before any compaction began beside the ticks", res.Tick)
		}
		if waitSummaryBegun(t, s.env, s.started) {
			return
		}
	}
}

// tickWaiting posts text to brom and ticks it, and expects the tick to
// wait for the summary being written (handOver): once it does, meanwhile
// (if any) runs and the summary is released. It returns the tick's result
// once the compaction has ended.
func (s *slowSummaries) tickWaiting(t *testing.T, text string, meanwhile func()) *Result {
	t.Helper()
	ctx := context.Background()
	waiting := make(chan struct{})
	s.env.eng.handingOver = func() { close(waiting) }
	done := make(chan *Result, 1)
	go func() {
		res, err := func() (*Result, error) {
			if _, _, err := s.env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: text}}); err != nil {
				return nil, err
			}
			return s.env.eng.Tick(ctx, "brom")
		}()
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case <-waiting:
	case res := <-done:
		t.Fatalf("the tick ended (%+v) without waiting for the summary being written", res)
	}
	if meanwhile != nil {
		meanwhile()
	}
	close(s.release)
	res := <-done
	<-s.env.eng.Compacting("brom")
	if res == nil {
		t.Fatal("the tick failed")
	}
	return res
}

// checkOne checks that one summary was written and one compaction stored
// since begin, the one begun beside the ticks, and that nothing was lost.
func (s *slowSummaries) checkOne(t *testing.T) {
	t.Helper()
	if n := s.f.count("summary") - s.summaries; n != 1 {
		t.Fatalf("%d summaries written, want 1: the compaction begun beside the ticks is finished, never summarized again", n)
	}
	recs := records(t, s.env)
	if len(recs)-s.before != 1 || recs[len(recs)-1].Trigger != sleep.TriggerBackground {
		t.Fatalf("%d compactions stored, want the one begun beside the ticks", len(recs)-s.before)
	}
	checkStored(t, s.env)
}

// waitSummaryBegun reports whether the last tick began a compaction beside
// the ticks, waiting, when it did, until its summary is asked for (started).
func waitSummaryBegun(t *testing.T, env *testEnv, started <-chan struct{}) bool {
	t.Helper()
	if _, ok := env.eng.compacting.Load("brom"); !ok {
		return false
	}
	select {
	case <-started:
		return true
	case <-time.After(10 * time.Second):
		t.Fatal("a compaction began beside the ticks but never asked for its summary")
		return false
	}
}

// Close cancels a background compaction still writing its summary; it
// commits nothing, and the history is as the ticks left it.
func TestCloseCancelsABackgroundCompaction(t *testing.T) {
	s := newSlowSummaries(t)
	env := s.env
	ctx := context.Background()
	s.begin(t, nil)
	live, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	// The summarizer would answer only when the test ends (or its client
	// gives up, after 5s): Close must cancel the call, not wait for it.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := env.eng.Close(cctx); err != nil {
		t.Fatalf("close with a background compaction writing its summary: %v", err)
	}
	if n := len(records(t, env)) - s.before; n != 0 {
		t.Fatalf("%d compactions stored after the close, want none", n)
	}
	after, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(live) {
		t.Fatalf("%d live messages after the close, want the %d the ticks left", len(after), len(live))
	}
	checkStored(t, env)
}

func TestAwaitedTokensForeseeTheToolsLastResult(t *testing.T) {
	c := brom()
	c.State.Awaiting.V = []character.PendingCall{{ID: "a", Tool: "look"}}
	live := []character.Message{
		{Role: llm.RoleTool, ToolName: "look", ViewTokens: 300, Masked: true},
		{Role: llm.RoleTool, ToolName: "inventory", ViewTokens: 90},
		{Role: llm.RoleTool, ToolName: "look", ViewTokens: 520, Masked: true}, // the last look: masked, still what one costs
		{Role: llm.RoleAssistant},
	}
	e := &Engine{}
	if got, _ := e.awaitedTokens(c, live); got != 520 {
		t.Fatalf("awaitedTokens = %d, want 520, the last look result's cost", got)
	}
	c.State.Awaiting.V = append(c.State.Awaiting.V, character.PendingCall{ID: "b", Tool: "inventory"}, character.PendingCall{ID: "c", Tool: "smell"})
	if got, _ := e.awaitedTokens(c, live); got != 520+90 {
		t.Fatalf("awaitedTokens = %d, want %d: each awaited call's tool's last result, none for a tool never answered", got, 520+90)
	}
	// A result compacted away is foreseen as the engine saw it posted;
	// one in the live history is newer than any posted before it.
	e.notePosted("brom", []*character.Message{{ToolName: "smell", ViewTokens: 40}, {ToolName: "look", ViewTokens: 999}})
	if got, _ := e.awaitedTokens(c, live); got != 520+90+40 {
		t.Fatalf("awaitedTokens = %d, want %d", got, 520+90+40)
	}
	e.forgetPosted("brom")
	if got, _ := e.awaitedTokens(c, live); got != 520+90 {
		t.Fatalf("awaitedTokens after the NPC is forgotten = %d, want %d", got, 520+90)
	}
	// What stays once read: the placeholders (none set here), and the
	// results of exempt tools whole.
	if _, kept := e.awaitedTokens(c, live); kept != 0 {
		t.Fatalf("kept = %d with no tool exempt and no placeholder cost, want 0", kept)
	}
	c.Masking.ExemptTools.V = []string{"inventory"}
	if n, kept := e.awaitedTokens(c, live); n != 520+90 || kept != 90 {
		t.Fatalf("awaitedTokens with inventory exempt = %d, kept %d; want %d, kept 90", n, kept, 520+90)
	}
	live[2].MaskTokens = 28
	if n, kept := e.awaitedTokens(c, live); n != 520+90 || kept != 28+90 {
		t.Fatalf("awaitedTokens with a look placeholder of 28 = %d, kept %d; want %d, kept %d", n, kept, 520+90, 28+90)
	}
}

// A tick that asks the game to look around, with the context past the sleep
// threshold, starts the compaction beside the ticks when the last look
// result would take it to the emergency threshold, though the tick itself
// added little: the tick that reads the new result then need not compact.
func TestAnAwaitedObservationStartsTheCompaction(t *testing.T) {
	env := newEnv(t)
	env.eng.cfg.BackgroundCompaction = true
	ctx := context.Background()
	c := brom()
	c.Tools.V = append(character.DefaultTools(), character.ToolSpec{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object"}, Returns: true})
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	room := strings.Repeat("An anvil, a quench tub of black water, tongs and hammers on the wall. ", 60) // ~1,000 tokens
	look := func() *Result {
		res := tickOnce(t, env, "Can you look around for my sword?")
		if len(res.Awaiting) != 1 {
			t.Fatalf("asked to look, the model awaits %v", res.Awaiting)
		}
		return res
	}
	answer := func(res *Result) *Result {
		<-env.eng.Compacting("brom")
		return answerOnce(t, env, res.Awaiting[0], room)
	}
	answer(look())
	for i := 0; ; i++ {
		got, err := env.chars.Get(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		if got.Utilization() >= got.Compaction.SleepThreshold {
			break
		}
		if i == 200 || len(records(t, env)) > 0 {
			t.Fatalf("no tick reached the sleep threshold before a compaction (utilization %.2f)", got.Utilization())
		}
		tickOnce(t, env, fmt.Sprintf("Round %d: the north road is busy today.", i))
	}
	res := look()
	if _, began := env.eng.compacting.Load("brom"); !began {
		got, _ := env.chars.Get(ctx, "brom")
		t.Fatalf("a look awaited at utilization %.2f, with a last look result of ~1,000 tokens, began no compaction beside the ticks", got.Utilization())
	}
	if res := answer(res); res.Compaction != nil {
		t.Fatalf("the tick reading the new look result compacted (%s)", res.Compaction.Trigger)
	}
	recs := records(t, env)
	if len(recs) != 1 || recs[0].Trigger != sleep.TriggerBackground {
		t.Fatalf("compactions %+v, want one, beside the ticks", recs)
	}
	checkStored(t, env)
}

func TestForesee(t *testing.T) {
	c := brom()
	c.ContextWindow, c.MaxOutputTokens = 2048, 204
	c.ApplyDefaults() // sleep 1,433.6, emergency 1,638.4 tokens
	// A look result the model has read, already masked: no excess.
	live := []character.Message{{Role: llm.RoleTool, ToolName: "look", ViewTokens: 500, MaskTokens: 30, Masked: true}, {Role: llm.RoleAssistant}}
	e := &Engine{}
	for _, tc := range []struct {
		name          string
		used, grew    int
		awaitsLook    bool
		near          bool
		wantForeseen  int
		checkForeseen bool
	}{
		{"a look awaited that the next tick can read first", 1300, 50, true, false, 0, false},
		{"a look awaited that would not fit beside the reply", 1400, 50, true, true, 500, true},
		{"a look awaited past the sleep threshold", 1450, 50, true, true, 500, true},
		{"past the sleep threshold, nothing awaited, the next tick short of the emergency", 1450, 50, false, false, 0, false},
		{"past the sleep threshold, the next tick like the last at the emergency", 1600, 50, false, true, 50, true},
		{"below the sleep threshold, a tick that grew much", 1300, 400, false, false, 0, false},
		// readFirst's rule, as the next tick applies it.
		{"a look awaited that would fit, with masking off", 1300, 50, true, true, 500, true},
		{"a look awaited that would fit, of a tool exempt from masking", 1300, 50, true, true, 500, true},
	} {
		on, off := true, false
		c.Masking.Enabled, c.Masking.ExemptTools.V = &on, nil
		switch {
		case strings.HasSuffix(tc.name, "with masking off"):
			c.Masking.Enabled = &off
		case strings.HasSuffix(tc.name, "exempt from masking"):
			c.Masking.ExemptTools.V = []string{"look"}
		}
		c.State.LiveTokens = tc.used
		c.State.Awaiting.V = nil
		if tc.awaitsLook {
			c.State.Awaiting.V = []character.PendingCall{{ID: "a", Tool: "look"}}
		}
		foreseen, near := e.foresee(c, live, usedTokens(c, live), tc.grew)
		if near != tc.near || (tc.checkForeseen && foreseen != tc.wantForeseen) {
			t.Errorf("%s: foresee = %d, %v; want near %v (foreseen %d)", tc.name, foreseen, near, tc.near, tc.wantForeseen)
		}
	}
}

// A look result awaited leaves its placeholder once read: foresee counts
// it in the rest of the context, as the next tick's readFirst does, so a
// placeholder that takes the rest past the sleep threshold calls for the
// compaction beside the ticks instead of leaving it to that tick.
func TestForeseeCountsThePlaceholdersLeft(t *testing.T) {
	c := brom()
	c.ContextWindow, c.MaxOutputTokens = 4096, 512
	c.ApplyDefaults() // sleep 2,867.2, emergency 3,276.8 tokens
	live := []character.Message{{Role: llm.RoleTool, ToolName: "look", ViewTokens: 514, MaskTokens: 28, Masked: true}, {Role: llm.RoleAssistant}}
	c.State.Awaiting.V = []character.PendingCall{{ID: "a", Tool: "look"}}
	e := &Engine{}
	for _, tc := range []struct {
		used int
		near bool
	}{
		{2830, false}, // 2,858 left once read: the next tick reads it first
		{2840, true},  // 2,868 left: past the sleep threshold
	} {
		c.State.LiveTokens = tc.used
		if _, near := e.foresee(c, live, usedTokens(c, live), 100); near != tc.near {
			t.Errorf("%d tokens, a look of 514 awaited (placeholder 28): near %v, want %v", tc.used, near, tc.near)
		}
	}
}

// What a result the game posts costs is noted, so that the next call of
// its tool is foreseen once the result itself has been compacted away; the
// note goes with the NPC.
func TestPostedResultsAreNotedAndForgotten(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	putSmallWindowNPC(t, env)
	res := tickOnce(t, env, "Can you look around for my sword?")
	if len(res.Awaiting) != 1 {
		t.Fatalf("asked to look, the model awaits %v", res.Awaiting)
	}
	if err := env.eng.PostToolResults(ctx, "brom", []ToolResult{{CallID: res.Awaiting[0], Content: strings.Repeat("An anvil and a quench tub. ", 40)}}); err != nil {
		t.Fatal(err)
	}
	live, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	posted := live[len(live)-1]
	if posted.Role != llm.RoleTool || posted.ViewTokens == 0 {
		t.Fatalf("the newest message is %+v, want the posted look result", posted)
	}
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	c.State.Awaiting.V = []character.PendingCall{{ID: "next", Tool: "look"}}
	// No live history: only the note can tell.
	if got, kept := env.eng.awaitedTokens(c, nil); got != posted.ViewTokens || kept != posted.MaskTokens || kept >= got {
		t.Fatalf("a look awaited after its last result was compacted away is foreseen at %d tokens, %d left once read; want the %d and %d the posted one cost", got, kept, posted.ViewTokens, posted.MaskTokens)
	}
	if err := env.eng.DeleteNPC(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	if got, _ := env.eng.awaitedTokens(c, nil); got != 0 {
		t.Fatalf("the deleted NPC's note is still there: %d tokens foreseen", got)
	}
}

// Background compactions write their summaries Config.BackgroundCompactions
// at a time. A tick that needs the compaction of its NPC while that one
// still waits for its turn does not wait for the runs before it: it drops
// the run and compacts itself, and the dropped run never asks for a
// summary.
func TestTickCompactsItselfRatherThanWaitForItsTurn(t *testing.T) {
	s := newSlowSummaries(t)
	env := s.env
	if n := cap(env.eng.besideSlots); n != max(1, runtime.GOMAXPROCS(0)/2) {
		t.Fatalf("%d background compactions at once by default, want half the cores", n)
	}
	// The slots all taken, as by the compactions of other NPCs.
	env.eng.besideSlots = make(chan struct{}, 1)
	env.eng.besideSlots <- struct{}{}
	summaries := s.f.count("summary")
	before := len(records(t, env))
	var run *besideRun
	for i := 0; run == nil; i++ {
		if i == 200 {
			t.Fatal("no compaction began beside the ticks")
		}
		if res := tickOnce(t, env, fmt.Sprintf("Tale %d: the north road is long and the wolves are hungry this winter.", i)); res.Compaction != nil {
			t.Fatalf("tick %d compacted before any compaction began beside the ticks", res.Tick)
		}
		if v, ok := env.eng.compacting.Load("brom"); ok {
			run = v.(*besideRun)
		}
	}
	// It waits for its turn, and asks for no summary meanwhile.
	time.Sleep(20 * time.Millisecond)
	if st := run.state.Load(); st != runQueued || s.f.count("summary") != summaries {
		t.Fatalf("the run is in state %d with %d summaries asked for, want it waiting for its turn and none", st, s.f.count("summary")-summaries)
	}
	env.eng.handingOver = func() { t.Error("the tick waited for a compaction that had not begun") }
	// A long tale: the tick must compact before its model call.
	res := tickOnce(t, env, longTale)
	if res.Compaction == nil || res.Compaction.Trigger != sleep.TriggerEmergency {
		t.Fatalf("the tick reported compaction %+v, want its own", res.Compaction)
	}
	select {
	case <-env.eng.Compacting("brom"):
	case <-time.After(10 * time.Second):
		t.Fatal("the dropped run did not end")
	}
	if st := run.state.Load(); st != runDropped {
		t.Fatalf("the run is in state %d, want dropped", st)
	}
	<-env.eng.besideSlots
	if n := s.f.count("summary") - summaries; n != 1 {
		t.Fatalf("%d summaries written, want the tick's own alone", n)
	}
	if recs := records(t, env); len(recs)-before != 1 || recs[len(recs)-1].Trigger != sleep.TriggerEmergency {
		t.Fatalf("%d compactions stored, want the tick's own alone", len(recs)-before)
	}
	checkStored(t, env)
}

// A background compaction keeps its turn until its commit: the commits of
// a burst of them would otherwise queue the ticks' commits behind them.
func TestBackgroundCompactionKeepsItsTurnUntilItsCommit(t *testing.T) {
	s := newSlowSummaries(t)
	env := s.env
	s.begin(t, nil)
	v, ok := env.eng.compacting.Load("brom")
	if !ok {
		t.Fatal("no compaction under way")
	}
	run := v.(*besideRun)
	locked, unlock := make(chan struct{}), make(chan struct{})
	go func() {
		err := env.eng.WithNPCLock(context.Background(), "brom", func(context.Context) error {
			close(locked)
			<-unlock
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}()
	<-locked
	close(s.release)
	<-run.ready
	// The summary is written; the commit waits for the NPC's lock.
	if n := len(env.eng.besideSlots); n != 1 {
		close(unlock)
		t.Fatalf("%d turns held while the compaction waits to commit, want its own", n)
	}
	close(unlock)
	<-env.eng.Compacting("brom")
	if n := len(env.eng.besideSlots); n != 0 {
		t.Fatalf("%d turns held once the compaction ended, want none", n)
	}
	s.checkOne(t)
}
