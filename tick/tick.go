package tick

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tools"
)

// Recovery outcomes reported in Result.Recovery.
const (
	RecoveryCompacted  = "compacted"
	RecoveryNewestTurn = "newest_turn_only"
)

// NotableImportance is the heuristic importance from which a perceived event
// is also written to the journal.
const NotableImportance = 5

// UnnamedTool is the name a tool call that named no tool is stored under.
// Such a call is never run, even when a tool has this name: it is answered
// to the model as a mistake.
const UnnamedTool = "unnamed"

// unansweredResult answers a returns:true call whose result the game never
// posted before sending new events, so no call is ever left without a result.
const unansweredResult = "(no result: new events arrived before the game answered this call)"

// Tick runs one tick of NPC id: it consumes pending events (or continues a
// turn whose tool results the game posted), calls the model, and commits
// the turn. With nothing to answer it returns an idle result without calling
// the model or writing anything. Ticks of one NPC never overlap.
func (e *Engine) Tick(ctx context.Context, id string) (*Result, error) {
	return e.TickWithKey(ctx, id, "")
}

// logTick writes the one line an operator reads per tick: idle ticks at
// debug level (a game polling idle NPCs would drown the rest), the others
// at info.
func (e *Engine) logTick(res *Result, d time.Duration) {
	ev := e.deps.Log.Info()
	if res.Idle {
		ev = e.deps.Log.Debug()
	}
	if !ev.Enabled() {
		return
	}
	ev = ev.Str("npc", res.NPC).Int64("tick", res.Tick).Bool("idle", res.Idle).
		Int("prompt_tokens", res.Usage.PromptTokens).Int("completion_tokens", res.Usage.CompletionTokens).
		Int("llm_calls", res.Usage.LLMCalls).Float64("model_ms", ms(res.modelTime)).Float64("duration_ms", ms(d)).
		Float64("utilization", res.Context.Utilization).Int("actions", len(res.Actions))
	if c := res.Compaction; c != nil {
		ev = ev.Str("compaction", c.Trigger).Int("tokens_before", c.TokensBefore).Int("tokens_after", c.TokensAfter)
	}
	ev.Msg("tick")
}

// glance reads NPC id's character.Glance and, when events were posted to
// it through this engine since its last tick began, its pending events
// with it, in one statement (character.Store.GlanceEvents); evs is nil when
// they were not read. An idle tick — the commonest in a large world — reads
// one row, without the events' part: it would cost an idle tick a third
// more. Events that other processes posted are read after the glance.
func (e *Engine) glance(ctx context.Context, id string) (g *character.Glance, evs []character.Event, err error) {
	if _, ok := e.eventsPosted.LoadAndDelete(id); ok {
		return e.deps.Characters.GlanceEvents(ctx, id, e.cfg.MaxEventsPerTick)
	}
	g, err = e.deps.Characters.Glance(ctx, id)
	return g, nil, err
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// turnState accumulates what one tick produces before it is committed.
type turnState struct {
	c        *character.Character
	tick     int64
	turn     int64
	gameTime time.Time
	current  []*character.Message // to append, in order
	measured int                  // current[:measured] are measured (for the budget)
	user     *character.Message   // the new user message, if any
	live     []character.Message  // the live history the model sees, as of c's revision
	events   []character.Event
	refs     []string
	effects  []tools.Effect
	actions  []Action
	awaiting []character.PendingCall
	usage    Usage
	text     string
	invalid  int
	comp     *sleep.Record
	// deferred is set when the tick skipped an emergency compaction,
	// because the model reads its unread tool results first (readFirst)
	// or because a compaction begun beside the ticks lands after it
	// (rides): a further step of the turn then compacts before its call
	// if its prompt no longer fits the window (fitStep).
	deferred bool
	// modelTime is the time spent in model calls, for the tick's log line.
	modelTime time.Duration
	recovery  string
	// key is the tick's idempotency key; res is its answer, built and
	// stored in the commit.
	key string
	res *Result
}

func (e *Engine) tick(ctx context.Context, id, key string) (*Result, error) {
	cs := e.deps.Characters
	g, evs, err := e.glance(ctx, id)
	if err != nil {
		return nil, err
	}
	if !g.Pending && !g.NPC.State.Resume {
		return e.idleWithKey(ctx, g.NPC, key)
	}
	// A tick that goes on gives up its core once, here. On SQLite its
	// glance took and released mutexes that the writer of the commit
	// groups takes too (the driver's memory allocator, SQLite's page
	// cache), and a writer woken by such a release waits for a core while
	// the ticks it commits wait for it: behind the rest of this tick, some
	// hundreds of microseconds of CPU before it next blocks, and behind
	// other ticks queued meanwhile. Yielding now lets the writer run
	// first. 1,000 NPCs on 2 cores, 32 ticks at once: 10-30% more ticks a
	// second in alternated runs, the cores 83-85% busy instead of 78-79%.
	if e.commits.grouped {
		e.yield()
	}
	c, err := e.npc(ctx, id, g)
	if err != nil {
		return nil, err
	}
	set, err := e.toolSet(c)
	if err != nil {
		return nil, fmt.Errorf("tools of %q: %w", id, err)
	}
	if evs == nil && g.Pending {
		if evs, err = cs.PendingEvents(ctx, id, e.cfg.MaxEventsPerTick); err != nil {
			return nil, err
		}
	}
	if len(evs) == 0 && !c.State.Resume {
		return e.idleWithKey(ctx, c, key)
	}
	counter := e.Counter(c.Model)
	evs, shown := fitEvents(evs, c, int(e.cfg.EventShare*float64(c.ContextWindow)), counter)
	ts := &turnState{c: c, tick: c.State.Tick + 1, turn: c.State.Turn, gameTime: c.State.GameTime, events: evs, key: key}
	// The NPC's marks as the glance read them, nil when it did not.
	var marks *journal.Marks
	var profileRev *int64
	if g.Marked {
		marks = &journal.Marks{GameTime: c.State.GameTime, HistoryRev: c.State.HistoryRev, MemoryRev: g.MemoryRev, NewestEntry: g.NewestEntry}
		profileRev = &g.ProfileRev
	}

	// A returns:true call still unanswered when new events arrive gets a
	// placeholder result, so the model never sees a call without a result.
	if len(evs) > 0 {
		for _, pc := range c.State.Awaiting.V {
			ts.current = append(ts.current, &character.Message{Role: llm.RoleTool, ToolCallID: pc.ID, ToolName: pc.Tool,
				Content: unansweredResult, Turn: ts.turn, Tick: ts.tick, GameTime: ts.gameTime})
		}
		ts.turn++
		for _, ev := range evs {
			if ev.Ref != nil {
				ts.refs = append(ts.refs, *ev.Ref)
			}
			if ev.At.After(ts.gameTime) {
				ts.gameTime = ev.At
			}
		}
		ts.user = &character.Message{Role: llm.RoleUser, Content: e.perceived(shown, c.Name), Turn: ts.turn, Tick: ts.tick,
			EventRefs: store.NewJSON(ts.refs), GameTime: ts.gameTime}
		ts.current = append(ts.current, ts.user)
	}
	if ts.gameTime.IsZero() {
		ts.gameTime = e.deps.Clock.Now().UTC()
	}

	// Budget: the running totals make this O(1); only the new messages are
	// measured here, as the commit will store them (character.Measure).
	pending := 0
	for _, m := range ts.current {
		character.Measure(m, counter, c.Masking.OffloadBytes)
		pending += m.PromptTokens()
	}
	ts.measured = len(ts.current)
	if err := e.ensureBudget(ctx, ts, pending); err != nil {
		return nil, err
	}
	c = ts.c

	if ts.live, err = e.liveHistory(ctx, ts.c); err != nil {
		return nil, err
	}
	working := ""
	if ts.user != nil {
		budget := int(float64(c.ContextWindow) * e.cfg.WorkingContextShare)
		if room := c.ContextWindow - c.MaxOutputTokens - ts.c.ContextTokens() - pending - llm.ReplyPriming; room < budget {
			budget = room
		}
		// The marks hold while the history is the one glanced at: a
		// compaction since (in this tick, or beside it and taken over)
		// wrote to it.
		if marks != nil && marks.HistoryRev != c.State.HistoryRev {
			marks = nil
		}
		working, err = e.workingContext(ctx, c, evs, ts.live, marks, profileRev, budget, counter)
		if err != nil {
			return nil, err
		}
	}

	if err := e.runModel(ctx, ts, set, working); err != nil {
		return nil, err
	}
	// Measured before the commit, which extends the held history in place.
	before := 0
	if e.cfg.BackgroundCompaction {
		before = usedTokens(ts.c, ts.live)
	}
	after, err := e.commit(ctx, ts, counter)
	if err != nil {
		return nil, err
	}
	if e.cfg.BackgroundCompaction && ts.comp == nil && after != nil {
		if live, ok := e.history.get(c.ID, after.State.HistoryRev); ok {
			e.compactBeside(after, live, before)
		}
	}
	return ts.res, nil
}

// result is the turn's answer, given the NPC as the commit leaves it.
func (ts *turnState) result(after *character.Character) *Result {
	res := &Result{
		NPC: ts.c.ID, Tick: ts.tick, Actions: ts.actions, Awaiting: callIDs(ts.awaiting), Text: ts.text,
		Context: ContextOf(after), Compaction: CompactionOf(ts.comp), Usage: ts.usage, Recovery: ts.recovery,
		InvalidCalls: ts.invalid, Warnings: Warnings(after), Events: len(ts.events), modelTime: ts.modelTime,
	}
	if res.Actions == nil {
		res.Actions = []Action{}
	}
	return res
}

// fitEvents returns the prefix of evs this tick consumes, within budget
// tokens, and the events as shown to the model (an event too long on its own
// is clipped there; the stored event keeps its full text). At least one
// event is always consumed, so the inbox never stalls.
func fitEvents(evs []character.Event, c *character.Character, budget int, counter *llm.Counter) (taken, shown []character.Event) {
	used := 0
	for i, ev := range evs {
		n := counter.Text(formatEvents([]character.Event{ev}, c.Name))
		if n > budget {
			keep := max(64, budget*3) // about three bytes a token
			if keep < len(ev.Text) {
				ev.Text = truncate(ev.Text, keep) + fmt.Sprintf(" [clipped: %d bytes not shown]", len(ev.Text)-keep)
			}
			n = counter.Text(formatEvents([]character.Event{ev}, c.Name))
		}
		if i > 0 && used+n > budget {
			break
		}
		used += n
		taken = append(taken, evs[i])
		shown = append(shown, ev)
	}
	return taken, shown
}

// idleWithKey answers an idle tick, storing the answer under key if any.
func (e *Engine) idleWithKey(ctx context.Context, c *character.Character, key string) (*Result, error) {
	res := e.idle(c)
	if key != "" {
		if err := e.idleKeyed(ctx, res, key); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (e *Engine) idle(c *character.Character) *Result {
	return &Result{NPC: c.ID, Tick: c.State.Tick, Idle: true, Actions: []Action{}, Awaiting: callIDs(c.State.Awaiting.V),
		Context: ContextOf(c), Warnings: Warnings(c)}
}

func callIDs(pcs []character.PendingCall) []string {
	out := make([]string, 0, len(pcs))
	for _, pc := range pcs {
		out = append(out, pc.ID)
	}
	return out
}

// ensureBudget masks and compacts before the model call when the context
// with the new messages reaches the emergency threshold, unless only tool
// results the model has not read yet put it there and the prompt fits the
// window (readFirst): then the model reads them first, and routine masking
// shrinks them on a later tick; or unless a compaction begun beside the
// ticks is under way and the prompt fits the window (rides): then it lands
// after the tick, which does not wait for its summary. A compaction begun
// beside the ticks whose summary is written lands first (landWritten).
// Each step returns the NPC as it leaves it, so the row is never read
// again.
func (e *Engine) ensureBudget(ctx context.Context, ts *turnState, pending int) error {
	comp := e.deps.Compactor
	if comp == nil {
		return nil
	}
	if err := e.landWritten(ctx, ts); err != nil {
		return err
	}
	if err := e.maskRead(ctx, ts, pending); err != nil {
		return err
	}
	if !ts.c.OverEmergency(ts.c.ContextTokens() + pending) {
		return nil
	}
	if err := e.maskAll(ctx, ts); err != nil {
		return fmt.Errorf("mask before tick: %w", err)
	}
	if !ts.c.OverEmergency(ts.c.ContextTokens() + pending) {
		return nil
	}
	if read, err := e.readFirst(ctx, ts.c, pending); err != nil || read {
		ts.deferred = read
		return err
	}
	if e.rides(ts.c, pending) {
		ts.deferred = true
		return nil
	}
	rec, after, err := e.compact(ctx, ts, sleep.TriggerEmergency, func(c *character.Character) bool {
		return c.OverEmergency(c.ContextTokens() + pending)
	})
	if err != nil {
		return fmt.Errorf("emergency compaction: %w", err)
	}
	ts.c, ts.comp = after, rec
	return nil
}

// liveCompactor is a Compactor that can plan from the live history its
// caller holds instead of reading it again, as sleep.Compactor does.
type liveCompactor interface {
	CompactLive(ctx context.Context, c *character.Character, live []character.Message, trigger, instruction string) (*sleep.Record, *character.Character, error)
}

// compact runs a compaction of the NPC a tick holds (ts.c). A compaction
// begun beside the ticks that is writing its summary is finished instead
// (handOver, its wait counted as model time), so that the span is not
// summarized twice; when still, given the NPC it left, says that is not
// enough (nil: it is), the tick compacts again. The tick's own compaction
// plans from the live history held in memory at the NPC's revision when
// there is one and the Compactor can use it, so that the history is not
// read again, else as Compactor.Compact does. It returns the last
// compaction (nil when none was made) and the NPC as it left it.
func (e *Engine) compact(ctx context.Context, ts *turnState, trigger string, still func(*character.Character) bool) (*sleep.Record, *character.Character, error) {
	rec, after, waited, handled, err := e.handOver(ctx, ts.c)
	ts.modelTime += waited
	if err != nil {
		return nil, nil, err
	}
	c := ts.c
	if handled {
		if still == nil || !still(after) {
			return rec, after, nil
		}
		c = after
	}
	again, after, err := e.compactNow(ctx, c, trigger)
	if err != nil {
		return nil, nil, err
	}
	if again != nil {
		rec = again
	}
	return rec, after, nil
}

// compactNow runs the tick's own compaction of NPC c (see compact).
func (e *Engine) compactNow(ctx context.Context, c *character.Character, trigger string) (rec *sleep.Record, after *character.Character, err error) {
	planned := false
	if lc, ok := e.deps.Compactor.(liveCompactor); ok {
		if live, held := e.history.get(c.ID, c.State.HistoryRev); held {
			rec, after, err = lc.CompactLive(ctx, c, live, trigger, "")
			planned = true
		}
	}
	if !planned {
		rec, after, err = e.deps.Compactor.Compact(ctx, c, trigger, "")
	}
	e.landed(rec, after, err)
	return rec, after, err
}

// landed writes what compaction rec, which left the NPC as after, did to
// its live history through to the history held in memory (see
// historyCache.compacted), unless the compaction failed (err). The caller
// holds the NPC's lock.
func (e *Engine) landed(rec *sleep.Record, after *character.Character, err error) {
	if err == nil && rec != nil && after != nil {
		e.history.compacted(after.ID, rec.Live, after.State.HistoryRev)
	}
}

// runModel runs the model's step loop, routing each tool call.
func (e *Engine) runModel(ctx context.Context, ts *turnState, set *tools.Set, working string) error {
	c := ts.c
	system := e.systemPrompt(c)
	req := llm.Request{Task: llm.TaskTick, Tools: set.Definitions(), MaxTokens: c.MaxOutputTokens}
	newestOnly := false
	// The call ids of the history as it stood before the turn, and those
	// given out since: looked up in place, as a turn looks up only a few.
	seen := seenCalls{history: ts.live}
	// The prompt form of the live history is kept with it, so that each
	// call converts only what is new; a model that keeps nothing of the
	// prompt it is given gets each one in the same array.
	lp := e.history.promptOf(c.ID)
	// Counted as it is built when the model answering reports usage by
	// counting, as the builtin model does (llm.PromptCounter): it takes
	// the count (llm.Request.MessageTokens) instead of counting again.
	lp.countWith(e.models.UsageCounter(c.Model))
	prompt := lp.assemble
	if _, ok := e.models.Model(c.Model).(llm.MessagesBorrower); ok {
		var done func()
		prompt, done = lp.lendingPrompt(&e.lent)
		defer done()
	}
	for step := 0; step < c.MaxSteps; {
		if step > 0 && ts.deferred {
			if err := e.fitStep(ctx, ts, prompt(system, ts.live, working, ts.current)); err != nil {
				return err
			}
		}
		if newestOnly {
			req.Messages = assemble(system, newestTurn(ts.live, ts.turn), working, ts.current)
			req.MessageTokens, req.MessageEncoding = 0, ""
		} else {
			req.Messages = prompt(system, ts.live, working, ts.current)
			req.MessageTokens, req.MessageEncoding = lp.counted()
		}
		callStart := e.deps.Clock.Now()
		resp, err := e.chat(ctx, c, req)
		ts.modelTime += e.deps.Clock.Since(callStart)
		if llm.IsOverflow(err) {
			switch ts.recovery {
			case "":
				// Compact, rebuild, retry once.
				ts.recovery = RecoveryCompacted
				ts.deferred = false
				if e.deps.Compactor != nil {
					rec, after, cerr := e.compact(ctx, ts, sleep.TriggerOverflow, nil)
					if cerr != nil {
						return fmt.Errorf("overflow compaction: %w", cerr)
					}
					if rec != nil {
						ts.comp = rec
					}
					ts.c = after
					var err error
					if ts.live, err = e.liveHistory(ctx, ts.c); err != nil {
						return err
					}
				}
				continue
			case RecoveryCompacted:
				// Last resort: only the newest turn, for this call.
				ts.recovery = RecoveryNewestTurn
				newestOnly = true
				working = ""
				continue
			}
		}
		if llm.CodeOf(err) == llm.CodeBadToolCall && len(resp.Message.ToolCalls) > 0 {
			// A call naming no tool is the model's mistake, answered to it
			// like a call to an unknown tool (handleReply), not a failed tick.
			err = nil
		}
		if err != nil {
			return fmt.Errorf("model %q for %q: %w", c.Model, c.ID, err)
		}
		step++
		ts.usage.LLMCalls++
		ts.usage.PromptTokens += resp.Usage.PromptTokens
		ts.usage.CompletionTokens += resp.Usage.CompletionTokens
		more, err := e.handleReply(ctx, ts, set, resp.Message, &seen)
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	return nil
}

// newestTurn returns the live messages of the newest stored turn (those a
// continuation must keep), or nothing when the turn is not stored yet.
func newestTurn(live []character.Message, turn int64) []character.Message {
	for i := range live {
		if !live[i].Summary && live[i].Turn >= turn {
			return live[i:]
		}
	}
	return nil
}

// callID is the id npcd gives the seq-th tool call (from 0) of an NPC's
// tick: nine letters and digits, the tick in base 36 on six of them and
// seq on three, the one form Mistral's API and chat templates accept in a
// history. A tick past 36^6, or a call past the 46,656th of a tick, makes
// it longer; two such ids can then be alike, which handleReply's check
// against the live history and the tick's own ids (seenCalls) settles.
func callID(tick int64, seq int) string {
	var b [16]byte
	out := b[:0]
	out = appendPadded(out, tick, 6)
	return string(appendPadded(out, int64(seq), 3))
}

// callIDSpare spaces the numbers callID is given when a history already
// holds the natural one, past any tick's own calls.
const callIDSpare = 4096

// appendPadded appends n in base 36, left-padded with zeros to width.
func appendPadded(b []byte, n int64, width int) []byte {
	var d [13]byte
	digits := strconv.AppendInt(d[:0], n, 36)
	for i := len(digits); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, digits...)
}

// seenCalls is the call ids a turn's new calls must not repeat: those of
// the live history as it stood before the turn, and those given out since.
type seenCalls struct {
	history []character.Message
	given   []string
}

// has reports whether id is taken.
func (s *seenCalls) has(id string) bool {
	if slices.Contains(s.given, id) {
		return true
	}
	for i := range s.history {
		for _, tc := range s.history[i].ToolCalls.V {
			if tc.ID == id {
				return true
			}
		}
	}
	return false
}

// handleReply stores the assistant's message and answers its tool calls. It
// reports whether the model must be called again this tick: only when it
// used an internal tool or made a call that was refused, since it has to
// read those results. A step of fire-and-forget game actions (say, emote)
// ends the turn without a second call, and a call the game must answer
// makes the turn wait for the game.
func (e *Engine) handleReply(ctx context.Context, ts *turnState, set *tools.Set, msg llm.Message, seen *seenCalls) (bool, error) {
	content := truncate(strings.TrimSpace(msg.Content), e.cfg.MaxReplyBytes)
	a := &character.Message{Role: llm.RoleAssistant, Content: content, Turn: ts.turn, Tick: ts.tick, GameTime: ts.gameTime}
	var calls []character.ToolCall
	if n := len(msg.ToolCalls); n > 0 {
		calls = make([]character.ToolCall, 0, n)
	}
	nameless := map[string]bool{}
	for _, tc := range msg.ToolCalls {
		// Every call gets npcd's own id, whatever the model gave: results
		// are matched by id, so each must be unique within the NPC's
		// history (models and servers sometimes repeat or omit theirs),
		// and the id is sent twice in every later prompt, the call's and
		// its result's, where a provider's own (some 30 characters) costs
		// three times as many tokens.
		//
		// A history written before npcd gave its own ids may hold the one
		// due (a model's of the same form): the next free number past the
		// tick's own is taken instead.
		id := callID(ts.tick, len(seen.given))
		for k := 1; seen.has(id); k++ {
			id = callID(ts.tick, len(seen.given)+k*callIDSpare)
		}
		args := tc.Arguments
		if len(args) > tools.MaxArgsBytes {
			args = args[:tools.MaxArgsBytes]
		}
		// The id and the arguments are one string: the live history
		// keeps every call between ticks, and two objects a call were
		// some 40,000 more for each collection to trace in a world of
		// 1,000 NPCs.
		both := id + args
		id, args = both[:len(id)], both[len(id):]
		seen.given = append(seen.given, id)
		name := truncate(strings.TrimSpace(tc.Name), 64)
		if name == "" {
			// Stored under a placeholder: providers refuse a history whose
			// calls name no function.
			name = UnnamedTool
			nameless[id] = true
		}
		calls = append(calls, character.ToolCall{ID: id, Name: name, Args: args})
	}
	a.ToolCalls = store.NewJSON(calls)
	ts.current = append(ts.current, a)
	if len(calls) == 0 {
		ts.text = content
		return false, nil
	}
	waiting, more := false, false
	for i, tc := range calls {
		result := func(text string) {
			ts.current = append(ts.current, &character.Message{Role: llm.RoleTool, ToolCallID: tc.ID, ToolName: tc.Name,
				Content: text, Turn: ts.turn, Tick: ts.tick, GameTime: ts.gameTime})
		}
		if i >= e.cfg.MaxCallsPerStep {
			ts.invalid++
			more = true
			result(fmt.Sprintf("error: at most %d tool calls are run per step; this one was skipped", e.cfg.MaxCallsPerStep))
			continue
		}
		if nameless[tc.ID] {
			ts.invalid++
			more = true
			result(fmt.Sprintf("error: this call names no tool; call one of: %s", strings.Join(set.Names(), ", ")))
			continue
		}
		args, err := set.Validate(tc.Name, tc.Args)
		if err != nil {
			var ce *tools.CallError
			if !errors.As(err, &ce) {
				return false, err
			}
			ts.invalid++
			more = true
			result(ce.Reason)
			continue
		}
		tool, _ := set.Lookup(tc.Name)
		switch {
		case tool.Internal:
			r, err := e.deps.Internals.Run(ctx, tools.Call{NPC: ts.c.ID, ID: tc.ID, Name: tc.Name, Args: args, GameTime: ts.gameTime, EventRefs: ts.refs})
			if err != nil {
				return false, err
			}
			ts.effects = append(ts.effects, r.Effects...)
			more = true
			result(r.Content)
		case tool.Returns:
			ts.actions = append(ts.actions, Action{CallID: tc.ID, Tool: tc.Name, Args: args})
			ts.awaiting = append(ts.awaiting, character.PendingCall{ID: tc.ID, Tool: tc.Name})
			waiting = true
		default:
			ts.actions = append(ts.actions, Action{CallID: tc.ID, Tool: tc.Name, Args: args})
			result("ok")
		}
	}
	return more && !waiting, nil
}

// commit writes the turn in one transaction — its messages with their token
// counts, the NPC's new state, the events it consumed, journal entries for
// notable perceptions and the NPC's commitments, the tools' effects,
// masking of old observations and the tick record — and returns the NPC as
// it stands after. Either all of it is stored or none of it.
func (e *Engine) commit(ctx context.Context, ts *turnState, counter *llm.Counter) (*character.Character, error) {
	c := ts.c
	var after *character.Character
	var masked []int64
	var noted []*journal.Entry // the entries the tick added, after the NPC's entry prev
	var prev int64
	current := false // the live history read at c's revision is the stored one
	// Measured before the commit, not in it: the writer of a commit group
	// holds SQLite's only write lock, and counting there (the model's new
	// texts tokenized, the counter's cache locked against the ticks that
	// count meanwhile) held it longer. Tool results are measured in it,
	// with the ids they get (character.Store.InsertMeasured); the messages
	// measured for the budget are not measured again.
	for _, m := range ts.current[ts.measured:] {
		if m.Role != llm.RoleTool {
			character.Measure(m, counter, c.Masking.OffloadBytes)
		}
	}
	// Committed with the turns of other NPCs ticking meanwhile (see
	// committer); the function may run again, so it sets every result anew.
	err := e.commits.commit(ctx, func(ctx context.Context, tx *gorm.DB, late *lateRows) error {
		after, masked, current, ts.res, noted, prev = nil, nil, false, nil, nil, -1
		cs := e.deps.Characters.WithTx(tx)
		js := e.deps.Journal.WithTx(tx)
		d, err := cs.InsertMeasured(ctx, c.ID, ts.current, counter, c.Masking.OffloadBytes)
		if err != nil {
			return err
		}
		// One statement writes the state, adds the new messages to the
		// running totals and tells whether the history this tick read is
		// still the stored one (else another process wrote to it).
		st, held, err := cs.AdvanceState(ctx, c.ID, map[string]any{
			"tick": ts.tick, "turn": ts.turn, "awaiting": store.NewJSON(ts.awaiting), "resume": false, "game_time": ts.gameTime.UTC(),
		}, d, c.State.HistoryRev)
		if err != nil {
			return err
		}
		current = held
		var entries []*journal.Entry
		if ts.user != nil {
			seqs := make([]int64, len(ts.events))
			for i, ev := range ts.events {
				seqs[i] = ev.Seq
			}
			// Consumed with the events of the ticks committing alongside,
			// at the end of the group: exactly once, or the group fails.
			late.consumed = append(late.consumed, character.Consumption{NPC: c.ID, Seqs: seqs, Tick: ts.tick, MessageID: ts.user.ID})
			if entries, err = e.notePerceptions(ctx, cs, ts); err != nil {
				return err
			}
		}
		entries = append(entries, e.noteOwnWords(ts)...)
		if prev, err = js.AddFollowing(ctx, c.ID, entries...); err != nil {
			return err
		}
		noted = entries
		w := tools.Writers{Journal: js, Characters: cs}
		for _, ef := range ts.effects {
			if err := ef(ctx, w); err != nil {
				return err
			}
		}
		// The held history tells what masking has to do: most ticks
		// nothing, and the rows to mask otherwise, masked by id. A history
		// another process wrote to meanwhile is not the stored one: the
		// query finds the rows then.
		if before := ts.turn - int64(c.Masking.KeepRecentTurns) + 1; c.Masking.On() {
			var (
				m   character.Masked
				err error
			)
			if current {
				ids := maskableIDs(ts.live, ts.current, before, c.Masking.Exempt)
				if len(ids) > 0 {
					m, err = cs.MaskMessages(ctx, c.ID, ids)
				}
			} else {
				m, err = cs.MaskToolResults(ctx, c.ID, before, c.Masking.ExemptTools.V)
			}
			if err != nil {
				return err
			}
			masked = m.IDs
			if m.After != nil {
				st = m.After.State
			}
		}
		// The settings as this tick read them (they change only under the
		// NPC's lock), the state as the commit leaves it.
		a := *c
		a.State = st
		after = &a
		rec := &character.TickRecord{CharacterID: c.ID, Tick: ts.tick, At: e.deps.Clock.Now().UTC(), GameTime: ts.gameTime.UTC(),
			ContextTokens: after.ContextTokens(), Window: after.ContextWindow, Utilization: after.Utilization(),
			PromptTokens: ts.usage.PromptTokens, CompletionTokens: ts.usage.CompletionTokens, LLMCalls: ts.usage.LLMCalls,
			Actions: len(ts.actions), Recovery: ts.recovery}
		if ts.comp != nil {
			rec.CompactionID = &ts.comp.ID
		}
		if n := len(ts.current); n > 0 {
			rec.FirstMessageID, rec.LastMessageID = ts.current[0].ID, ts.current[n-1].ID
		}
		// The answer is stored with the turn, last: a game that never got
		// it fetches it again, and the feed delivers it. Both rows are
		// written with those of the ticks committing alongside.
		ts.res = ts.result(after)
		o, err := outcomeOf(ts.res, ts.key, rec.At)
		if err != nil {
			return err
		}
		late.ticks = append(late.ticks, rec)
		late.outcomes = append(late.outcomes, o)
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.feed.notify()
	e.appended(c, after.State.HistoryRev, current, ts.live, true, ts.current, masked)
	if a, ok := e.deps.Retriever.(entryAppender); ok {
		a.AppendedEntries(c.ID, prev, noted)
	}
	return after, nil
}

// lateWriter writes the event consumptions, tick records and outcomes
// that the ticks of a commit group left to its end (lateRows) through
// chars, the outcomes last.
func lateWriter(chars *character.Store) lateFunc {
	return func(ctx context.Context, tx *gorm.DB, late *lateRows) error {
		cs := chars.WithTx(tx)
		if err := cs.ConsumeAll(ctx, late.consumed); err != nil {
			return err
		}
		if err := cs.AddTicks(ctx, late.ticks); err != nil {
			return err
		}
		return cs.AddOutcomes(ctx, late.outcomes)
	}
}

// appended writes through what a commit that appended added to NPC c's
// live history (and masked masked in it) did, moving it from c's revision
// to rev: the next tick finds the history in memory, and the next search
// need not read back what was added, unless another process had written to
// the history since c was read (held is false then). live is the history
// held at c's revision, if known is set (when it is not, the next tick
// reads the history). The caller holds the NPC's lock.
func (e *Engine) appended(c *character.Character, rev int64, held bool, live []character.Message, known bool, added []*character.Message, masked []int64) {
	if !held {
		e.history.drop(c.ID)
		return
	}
	if known {
		e.history.put(c.ID, rev, afterTurn(live, added, masked))
	}
	if a, ok := e.deps.Retriever.(appender); ok {
		a.Appended(c.ID, c.State.HistoryRev, rev, added)
	}
}

// notePerceptions records who was seen in the turn's events and returns
// journal entries for the notable ones.
func (e *Engine) notePerceptions(ctx context.Context, cs *character.Store, ts *turnState) ([]*journal.Entry, error) {
	seen := map[string]bool{}
	var entries []*journal.Entry
	for _, ev := range ts.events {
		if k := actorKey(ev); k != "" && k != character.EntityKey(ts.c.Name) && !seen[k] {
			seen[k] = true
			// The display name is kept up to date: a renamed actor with
			// a game id keeps its profile under the new name.
			if err := cs.NoteSeen(ctx, ts.c.ID, k, ev.Actor, ev.At); err != nil {
				return nil, err
			}
		}
		imp := journal.Importance(ev.Kind, ev.Text)
		if imp < NotableImportance {
			continue
		}
		typ := journal.TypeObservation
		switch strings.ToLower(ev.Kind) {
		case "say", "whisper", "tell", "shout", "yell":
			typ = journal.TypeConversation
		}
		en := &journal.Entry{Type: typ, Content: formatEvents([]character.Event{ev}, ts.c.Name), Importance: imp, GameTime: ev.At}
		en.Sources.V.MessageIDs = []int64{ts.user.ID}
		if ev.Ref != nil {
			en.Sources.V.EventRefs = []string{*ev.Ref}
		}
		entries = append(entries, en)
	}
	return entries, nil
}

// noteOwnWords returns journal entries for the NPC's own commitments, so
// they are found again once compacted: the history's search reads message
// text, and what an NPC says goes out as tool calls. (What it merely echoes
// of what others said is journaled as their words already.)
func (e *Engine) noteOwnWords(ts *turnState) []*journal.Entry {
	var entries []*journal.Entry
	for _, m := range ts.current {
		if m.Role != llm.RoleAssistant {
			continue
		}
		for _, tc := range m.ToolCalls.V {
			if tc.Name != "say" {
				continue
			}
			text := tc.Text()
			// What it quotes of others (closed or cut off) is not its own
			// commitment.
			if !ownCommitment(text) {
				continue
			}
			imp := max(journal.Importance("say", text), NotableImportance+1)
			en := &journal.Entry{Type: journal.TypeNote, Content: "I said: " + text, Importance: imp, GameTime: ts.gameTime,
				Metadata: store.NewJSON(map[string]any{"call_id": tc.ID})}
			en.Sources.V = character.Sources{MessageIDs: []int64{m.ID}, EventRefs: ts.refs}
			entries = append(entries, en)
		}
	}
	return entries
}
