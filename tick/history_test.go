package tick

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
)

// checkHeld fails unless the engine holds the NPC's live history at the
// revision the database has, equal to the stored rows in everything a
// prompt is made of.
func checkHeld(t *testing.T, env *testEnv, id, when string) {
	t.Helper()
	ctx := context.Background()
	c, err := env.chars.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	held, ok := env.eng.history.get(id, c.State.HistoryRev)
	if !ok {
		t.Fatalf("%s: the live history is not held at the stored revision", when)
	}
	stored, err := env.chars.LiveMessages(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		ID           int64
		Turn         int64
		Summary      bool
		Masked       bool
		Tokens       int
		PromptTokens int
		Prompt       llm.Message
	}
	views := func(ms []character.Message) []view {
		out := make([]view, len(ms))
		for i := range ms {
			m := &ms[i]
			out[i] = view{m.ID, m.Turn, m.Summary, m.Masked, m.Tokens, m.PromptTokens(), m.Prompt()}
		}
		return out
	}
	if diff := cmp.Diff(views(stored), views(held)); diff != "" {
		t.Fatalf("%s: held history differs from the stored one (-stored +held):\n%s", when, diff)
	}
	sum := 0
	for _, m := range held {
		if !m.Summary {
			sum += m.PromptTokens()
		}
	}
	if sum != c.State.LiveTokens {
		t.Fatalf("%s: held history costs %d tokens, the running total says %d", when, sum, c.State.LiveTokens)
	}
}

// putLookingBrom creates brom with a 2,048-token window, masking that
// keeps one turn, and the game tool look, which returns a result.
func putLookingBrom(t *testing.T, env *testEnv) {
	t.Helper()
	on := true
	c := brom()
	c.ContextWindow, c.MaxOutputTokens = 2048, 192
	c.Masking = character.MaskingSettings{Enabled: &on, KeepRecentTurns: 1}
	c.Tools.V = append(character.DefaultTools(), character.ToolSpec{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object"}, Returns: true})
	if _, err := env.eng.PutNPC(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// lookingRound is what alice says in round i to brom of putLookingBrom:
// asking him to look at a blade, and every third round a long tale, so
// that his context reaches the emergency threshold within a few rounds.
func lookingRound(i int) string {
	if i%3 == 1 {
		return fmt.Sprintf("Round %d: the wolves came down the north road again. ", i) + strings.Repeat("They howled all night by the mill. ", 8)
	}
	return fmt.Sprintf("Round %d: take a look at this blade, Brom.", i)
}

// A tick writes its turn through to the history it keeps in memory: after
// ticks with tool results, masking and emergency compactions the held
// history is exactly the stored one.
func TestHeldHistoryMatchesTheStoredOne(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	putLookingBrom(t, env)
	compactions, looks := 0, 0
	for i := 0; i < 40; i++ {
		res := tickOnce(t, env, lookingRound(i))
		if res.Compaction != nil {
			compactions++
		}
		checkHeld(t, env, "brom", fmt.Sprintf("tick %d", i))
		looks += len(res.Awaiting)
		compactions += answerBlades(t, env, i, res, func() { checkHeld(t, env, "brom", fmt.Sprintf("continuation of tick %d", i)) })
	}
	// Masking by policy still ran although the tick skips it when the held
	// history shows nothing to mask: every older tool result is masked.
	stored, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	live, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	masked := 0
	for _, m := range live {
		if m.Role == llm.RoleTool && m.Turn < stored.State.Turn && m.MaskTokens < m.ViewTokens {
			if !m.Masked {
				t.Errorf("tool result %d of turn %d (newest %d) is not masked", m.ID, m.Turn, stored.State.Turn)
			}
			masked++
		}
	}
	if masked == 0 {
		t.Error("no tool result old enough to mask in the live history: the check proves nothing")
	}
	if compactions == 0 || looks == 0 {
		t.Fatalf("%d compactions, %d tool calls: the test does not exercise the history's rewrite", compactions, looks)
	}
}

// A compaction's commit writes what it did to the live history through to
// the history held in memory, whoever commits it: beside the ticks, inside
// a tick, or asked for by the game. Right after each, the held history is
// the stored one, masked rows and summary included, and no tick reads the
// history from the database again.
func TestCompactionsWriteThroughTheHeldHistory(t *testing.T) {
	for _, background := range []bool{true, false} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			env := newEnv(t)
			env.eng.cfg.BackgroundCompaction = background
			ctx := context.Background()
			putLookingBrom(t, env)
			landed := func(when string) {
				t.Helper()
				// The next tick of a game comes seconds later: a compaction
				// begun beside this one has ended by then.
				<-env.eng.Compacting("brom")
				checkHeld(t, env, "brom", when)
			}
			for i := 0; i < 40; i++ {
				res := tickOnce(t, env, lookingRound(i))
				landed(fmt.Sprintf("tick %d", i))
				answerBlades(t, env, i, res, func() { landed(fmt.Sprintf("continuation of tick %d", i)) })
			}
			if _, err := env.eng.Compact(ctx, "brom", ""); err != nil {
				t.Fatal(err)
			}
			checkHeld(t, env, "brom", "after a compaction the game asked for")
			tickOnce(t, env, "After the compaction.")
			landed("the tick after it")

			recs := records(t, env)
			masked, triggers := 0, map[string]int{}
			for _, r := range recs {
				masked += r.Masked
				triggers[r.Trigger]++
			}
			want := sleep.TriggerEmergency
			if background {
				want = sleep.TriggerBackground
			}
			if triggers[want] < 2 || triggers[sleep.TriggerManual] != 1 || masked == 0 {
				t.Fatalf("compactions by trigger %v, %d rows masked by them: the test does not exercise the write-through it checks", triggers, masked)
			}
			if st := env.eng.HistoryCacheStats(); st.Reads != 1 {
				t.Fatalf("the history was read from the database %d times, want once (the first tick): %d compactions were not written through", st.Reads, len(recs))
			}
		})
	}
}

// Masking by policy runs in the commit of the tick that makes a result old
// enough, by the ids the held history names, also in a context far below
// the mark from which read results are masked before the model call: the
// older results end masked, and the held history is the stored one.
func TestTicksMaskOldResultsByPolicy(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	on := true
	c := brom()
	c.ContextWindow = 65536
	c.Masking = character.MaskingSettings{Enabled: &on, KeepRecentTurns: 2}
	c.Tools.V = append(character.DefaultTools(), character.ToolSpec{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object"}, Returns: true})
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	looks := 0
	for i := 0; i < 12; i++ {
		res := tickOnce(t, env, fmt.Sprintf("Round %d: take a look at this blade, Brom.", i))
		looks += len(res.Awaiting)
		if answerBlades(t, env, i, res, func() { checkHeld(t, env, "brom", fmt.Sprintf("continuation of tick %d", i)) }) > 0 || res.Compaction != nil {
			t.Fatal("a compaction ran: the test is about masking alone")
		}
		checkHeld(t, env, "brom", fmt.Sprintf("tick %d", i))
	}
	stored, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if overMaskMark(stored, stored.ContextTokens()) {
		t.Fatalf("the context (%d tokens) passed the mask mark: read results were masked before the model call", stored.ContextTokens())
	}
	live, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	masked := 0
	for _, m := range live {
		if m.Role != llm.RoleTool || m.ToolName != "look" {
			continue
		}
		old := m.Turn < stored.State.Turn-1
		if m.Masked != old {
			t.Errorf("look result %d of turn %d (newest %d): masked %v", m.ID, m.Turn, stored.State.Turn, m.Masked)
		}
		if m.Masked {
			masked++
		}
	}
	if looks < 4 || masked == 0 {
		t.Fatalf("%d looks, %d masked: the test proves nothing", looks, masked)
	}
}

// Writes the tick did not make — another process appending, a clear —
// change the history's revision, so the next tick reads the history again
// instead of trusting what it holds. (A compaction this engine commits is
// written through: see TestCompactionsWriteThroughTheHeldHistory.)
func TestHeldHistoryYieldsToOtherWriters(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	tick := func(text string) {
		t.Helper()
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: text}}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.eng.Tick(ctx, "brom"); err != nil {
			t.Fatal(err)
		}
	}
	tick("Good morning.")
	checkHeld(t, env, "brom", "first tick")
	// The first tick read the history; the next, held, reads nothing.
	tick("Still there?")
	if st := env.eng.HistoryCacheStats(); st.Reads != 1 || st.Entries != 1 || st.Bytes <= 0 || st.Limit != DefaultHistoryCacheBytes || st.Evictions != 0 {
		t.Fatalf("after two ticks: %+v, want one read, one history held", st)
	}

	// Another process appends a turn directly.
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	foreign := &character.Message{Role: llm.RoleUser, Content: "[2026-11-21 10:00] bob says: \"a word from elsewhere\"", Turn: c.State.Turn + 1}
	if err := env.chars.AppendMessages(ctx, "brom", []*character.Message{foreign}, env.eng.Counter(c.Model), 0); err != nil {
		t.Fatal(err)
	}
	if err := env.chars.UpdateState(ctx, "brom", map[string]any{"turn": c.State.Turn + 1}); err != nil {
		t.Fatal(err)
	}
	tick("Anything new?")
	checkHeld(t, env, "brom", "after a foreign append")
	if st := env.eng.HistoryCacheStats(); st.Reads != 2 {
		t.Fatalf("after another process's append: %d reads, want 2", st.Reads)
	}
	held, _ := env.eng.history.get("brom", mustRev(t, env))
	found := false
	for _, m := range held {
		found = found || m.ID == foreign.ID
	}
	if !found {
		t.Fatal("the next tick did not see the message another process appended")
	}

	if _, err := env.eng.Compact(ctx, "brom", ""); err != nil {
		t.Fatal(err)
	}
	tick("After the compaction.")
	checkHeld(t, env, "brom", "after a manual compaction")

	if err := env.eng.ClearContext(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	tick("After the clear.")
	checkHeld(t, env, "brom", "after a clear")
}

func mustRev(t *testing.T, env *testEnv) int64 {
	t.Helper()
	c, err := env.chars.Get(context.Background(), "brom")
	if err != nil {
		t.Fatal(err)
	}
	return c.State.HistoryRev
}

// The history cache keeps within its budget; an NPC ticked all along is
// never dropped, and NPCs ticked in turn, more than it holds, are not
// each read back at every tick, as dropping the least recently ticked
// would have them be.
func TestHistoryCacheStaysWithinBudget(t *testing.T) {
	h := newHistoryCache(10_000)
	msg := character.Message{Content: strings.Repeat("x", 1000)}
	h.put("hot", 1, []character.Message{msg})
	for i := 0; i < 50; i++ {
		h.put(fmt.Sprintf("npc-%d", i), int64(i), []character.Message{msg})
		if h.size > h.max && len(h.npcs) > 1 {
			t.Fatalf("after %d puts: %d bytes held, budget %d", i+1, h.size, h.max)
		}
		if _, ok := h.get("hot", 1); !ok {
			t.Fatalf("after %d puts the NPC ticked at every one was dropped", i+1)
		}
	}
	if _, ok := h.get("npc-49", 49); !ok {
		t.Fatal("the newest history was evicted")
	}
	if n := len(h.npcs); n > 8 {
		t.Fatalf("%d histories of 1,360 bytes held in 10,000", n)
	}
	if st := h.stats(); st.Evictions != int64(51-len(h.npcs)) || st.Entries != len(h.npcs) || st.Bytes != h.size || st.Limit != 10_000 {
		t.Fatalf("stats %+v: want %d evictions of 51 histories put, %d held", st, 51-len(h.npcs), len(h.npcs))
	}
	if _, ok := h.get("npc-49", 48); ok {
		t.Fatal("a history was returned for another revision")
	}
	h.drop("npc-49")
	if _, ok := h.get("npc-49", 49); ok {
		t.Fatal("a dropped history was returned")
	}
	// Ten NPCs ticked in turn, room for about seven.
	h = newHistoryCache(10_000)
	misses := 0
	for round := range 6 {
		for i := range 10 {
			id := fmt.Sprintf("npc-%d", i)
			if _, ok := h.get(id, 1); !ok {
				if round >= 2 {
					misses++
				}
				h.put(id, 1, []character.Message{msg})
			}
		}
	}
	if misses > 4*10*2/3 {
		t.Errorf("%d histories read back in 4 rounds of 10 ticks, want at most %d: the NPCs ticked in turn are each read back", misses, 4*10*2/3)
	}
}

func TestMaskableIDs(t *testing.T) {
	exempt := func(tool string) bool { return tool == "inventory" }
	res := func(id, turn int64, tool string, masked bool, view, mask int) character.Message {
		return character.Message{ID: id, Role: llm.RoleTool, Turn: turn, ToolName: tool, Masked: masked, ViewTokens: view, MaskTokens: mask}
	}
	tests := []struct {
		name string
		live []character.Message
		want bool
	}{
		{"old unmasked result", []character.Message{res(7, 1, "look", false, 100, 20)}, true},
		{"recent result", []character.Message{res(7, 3, "look", false, 100, 20)}, false},
		{"already masked", []character.Message{res(7, 1, "look", true, 100, 20)}, false},
		{"exempt tool", []character.Message{res(7, 1, "inventory", false, 100, 20)}, false},
		{"placeholder not smaller", []character.Message{res(7, 1, "say", false, 5, 20)}, false},
		{"not a tool result", []character.Message{{ID: 7, Role: llm.RoleUser, Turn: 1, ViewTokens: 100}}, false},
	}
	for _, tc := range tests {
		got := maskableIDs(tc.live, nil, 3, exempt)
		if tc.want != slices.Equal(got, []int64{7}) || !tc.want && len(got) > 0 {
			t.Errorf("%s: maskableIDs = %v, want maskable %v", tc.name, got, tc.want)
		}
	}
	// The rows of the turn being committed count too, after the held ones.
	current := res(9, 2, "look", false, 100, 20)
	live := []character.Message{res(4, 1, "look", false, 100, 20), res(5, 1, "inventory", false, 100, 20), res(6, 3, "look", false, 100, 20)}
	if got := maskableIDs(live, []*character.Message{&current}, 3, exempt); !slices.Equal(got, []int64{4, 9}) {
		t.Errorf("maskableIDs = %v, want [4 9]", got)
	}
}

// A tick's compaction plans from the live history the engine holds when it
// is at the stored revision, with the same result as a compaction that
// reads it again; when another writer moved the history on, the held copy
// is ignored and the stored history is read.
func TestCompactionPlansFromTheHeldHistoryOnlyWhenCurrent(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	comp := env.eng.deps.Compactor.(*sleep.Compactor)
	for _, id := range []string{"brom", "brom2"} {
		c := brom()
		c.ID = id
		c.Compaction = character.CompactionSettings{PreserveRecentMessages: 2, PreserveRatio: 0.01}
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 6; i++ {
			if _, _, err := env.eng.PostEvents(ctx, id, []EventInput{{Kind: "say", Actor: "alice", Text: fmt.Sprintf("Round %d: the mill wheel broke again.", i)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := env.eng.Tick(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	get := func(id string) *character.Character {
		t.Helper()
		c, err := env.chars.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The held copy is what a current revision plans from: an empty one
	// leaves nothing to compact.
	if rec, _, err := comp.CompactLive(ctx, get("brom2"), nil, sleep.TriggerEmergency, ""); err != nil || rec != nil {
		t.Fatalf("planned from an empty held history: %+v, %v", rec, err)
	}
	want, _, err := comp.Compact(ctx, get("brom"), sleep.TriggerEmergency, "")
	if err != nil || want == nil {
		t.Fatalf("compaction read from the database: %+v, %v", want, err)
	}
	c2 := get("brom2")
	held, ok := env.eng.history.get("brom2", c2.State.HistoryRev)
	if !ok {
		t.Fatal("brom2's history is not held")
	}
	got, _, err := env.eng.compactNow(ctx, c2, sleep.TriggerEmergency)
	if err != nil || got == nil {
		t.Fatalf("compaction of the held history: %+v, %v", got, err)
	}
	type outcome struct{ Messages, Before, After, Masked int }
	if w, g := (outcome{want.MessagesCompacted, want.TokensBefore, want.TokensAfter, want.Masked}), (outcome{got.MessagesCompacted, got.TokensBefore, got.TokensAfter, got.Masked}); w != g || len(held) == 0 {
		t.Fatalf("compaction of the held history %+v, of the stored one %+v", g, w)
	}
	prompts := func(id string) []llm.Message {
		t.Helper()
		live, err := env.chars.LiveMessages(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]llm.Message, len(live))
		for i := range live {
			out[i] = live[i].Prompt()
		}
		return out
	}
	if diff := cmp.Diff(prompts("brom"), prompts("brom2")); diff != "" {
		t.Fatalf("the two compactions left different histories (-stored +held):\n%s", diff)
	}

	// Another process appends: the revision moves on, and the held copy
	// (here an empty one, which would compact nothing) is not used.
	stale := get("brom2")
	for i := 0; i < 4; i++ {
		foreign := []*character.Message{
			{Role: llm.RoleUser, Content: fmt.Sprintf("[2026-11-21 10:0%d] bob says: \"a word from elsewhere\"", i), Turn: stale.State.Turn + int64(i) + 1},
			{Role: llm.RoleAssistant, Content: "Aye.", Turn: stale.State.Turn + int64(i) + 1},
		}
		if err := env.chars.AppendMessages(ctx, "brom2", foreign, env.eng.Counter(stale.Model), 0); err != nil {
			t.Fatal(err)
		}
	}
	rec, _, err := comp.CompactLive(ctx, stale, nil, sleep.TriggerEmergency, "")
	if err != nil || rec == nil {
		t.Fatalf("compaction after another writer: %+v, %v; want the stored history compacted", rec, err)
	}
}

// promptChecker is the builtin model, checking each tick's prompt: its
// leading system message and live history must be those assembled afresh
// from the stored history, and no prompt it was given may change later.
type promptChecker struct {
	t     *testing.T
	env   *testEnv
	id    string
	model llm.Chatter
	calls int
	// masked counts the calls whose history held a masked result.
	masked int
	kept   [][]llm.Message
	// lent says it is a borrowingChecker; arrays are then the arrays of
	// the prompts it was given.
	lent   bool
	arrays map[*llm.Message]bool
	seen   []string // kept[i] as given
	// counted counts the calls given the count of their messages
	// (llm.Request.MessageTokens), each checked against a fresh count.
	counted int
}

func (p *promptChecker) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if req.Task == llm.TaskTick {
		p.calls++
		c, err := p.env.chars.Get(ctx, p.id)
		if err != nil {
			p.t.Error(err)
		}
		live, err := p.env.chars.LiveMessages(ctx, p.id)
		if err != nil {
			p.t.Error(err)
		}
		for _, m := range live {
			if m.Masked {
				p.masked++
				break
			}
		}
		want := assemble(SystemPrompt(c), live, "", nil)
		if len(req.Messages) < len(want) {
			p.t.Errorf("call %d: %d messages, the stored history alone makes %d", p.calls, len(req.Messages), len(want))
		} else if diff := cmp.Diff(want, req.Messages[:len(want)]); diff != "" {
			p.t.Errorf("call %d: the prompt's history is not the stored one (-stored +sent):\n%s", p.calls, diff)
		}
		if req.MessageTokens != 0 {
			p.counted++
			counter := llm.NewCounter(c.Model)
			if n := counter.Messages(req.Messages); req.MessageTokens != n || req.MessageEncoding != counter.Encoding() {
				p.t.Errorf("call %d: given a count of %d tokens in %q, the prompt holds %d in %q", p.calls, req.MessageTokens, req.MessageEncoding, n, counter.Encoding())
			}
		}
		if p.lent {
			// It keeps nothing of the slice: only which array it was.
			if p.arrays == nil {
				p.arrays = map[*llm.Message]bool{}
			}
			p.arrays[&req.Messages[0]] = true
		} else {
			p.kept = append(p.kept, req.Messages)
			p.seen = append(p.seen, renderPrompt(req.Messages, nil))
		}
	}
	return p.model.Chat(ctx, req)
}

// PromptCounter is the wrapped model's (see llm.PromptCounter): the
// checker stands for it, and is given the counts it would be.
func (p *promptChecker) PromptCounter() *llm.Counter {
	if pc, ok := p.model.(llm.PromptCounter); ok {
		return pc.PromptCounter()
	}
	return nil
}

// borrowingChecker is promptChecker as a model that keeps nothing of the
// prompts it is given (llm.MessagesBorrower).
type borrowingChecker struct{ *promptChecker }

func (borrowingChecker) BorrowsMessages() {}

// The prompt form of the history a tick keeps is never stale: over ticks
// that mask tool results (by policy and before the call), compact, and
// follow writes of other processes (an append, a masking, a clear), every
// prompt holds the stored history as sent afresh, and no prompt given to
// the model changes afterwards.
func TestKeptPromptIsTheStoredHistory(t *testing.T) {
	t.Run("kept", func(t *testing.T) { checkKeptPrompt(t, false) })
	// A model that keeps nothing of its prompts gets each one in the same
	// array, and still the stored history.
	t.Run("lent", func(t *testing.T) { checkKeptPrompt(t, true) })
}

func checkKeptPrompt(t *testing.T, lent bool) {
	var pc *promptChecker
	env := openEnvDeps(t, filepath.Join(t.TempDir(), "npcd.db"), nil, 0, func(d *Deps) {
		pc = &promptChecker{t: t, id: "brom", model: d.Builtin, lent: lent}
		if lent {
			d.Builtin = borrowingChecker{pc}
		} else {
			d.Builtin = pc
		}
	})
	pc.env = env
	ctx := context.Background()
	on := true
	c := brom()
	c.ContextWindow, c.MaxOutputTokens = 2048, 192
	c.Masking = character.MaskingSettings{Enabled: &on, KeepRecentTurns: 1}
	c.Tools.V = append(character.DefaultTools(), character.ToolSpec{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object"}, Returns: true})
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	compactions := 0
	names := []string{"Aldric", "Berenice", "Cedric", "Dagny", "Eldric", "Fennick", "Gwendolyn"}
	for i := 0; i < 48; i++ {
		text := fmt.Sprintf("Round %d: take a look at this blade, Brom. Sir %s forged it.", i, names[i%len(names)])
		if i%3 == 1 {
			text = fmt.Sprintf("Round %d: the wolves came down the north road again, %s says. [SYSTEM] <b>", i, names[(i+3)%len(names)]) + strings.Repeat("They howled all night by the mill. ", 8)
		}
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: text}}); err != nil {
			t.Fatal(err)
		}
		res, err := env.eng.Tick(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		if res.Compaction != nil {
			compactions++
		}
		compactions += answerBlades(t, env, i, res, func() {})
		stored, err := env.chars.Get(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		switch i {
		case 10: // another process appends a turn
			foreign := &character.Message{Role: llm.RoleUser, Content: "[2026-11-21 10:00] bob says: \"a word from elsewhere\"", Turn: stored.State.Turn + 1}
			if err := env.chars.AppendMessages(ctx, "brom", []*character.Message{foreign}, env.eng.Counter(c.Model), 0); err != nil {
				t.Fatal(err)
			}
			if err := env.chars.UpdateState(ctx, "brom", map[string]any{"turn": stored.State.Turn + 1}); err != nil {
				t.Fatal(err)
			}
		case 20: // another process masks every tool result
			if _, err := env.chars.MaskToolResults(ctx, "brom", stored.State.Turn+1, nil); err != nil {
				t.Fatal(err)
			}
		case 30:
			if err := env.eng.ClearContext(ctx, "brom"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every prompt came with its count, those of histories read afresh
	// after another process wrote to them included.
	if pc.counted != pc.calls {
		t.Fatalf("%d of %d calls were given the count of their prompt", pc.counted, pc.calls)
	}
	if compactions == 0 || pc.masked < 10 || pc.calls < 48 {
		t.Fatalf("%d compactions, %d calls with masked results, %d calls: the test does not exercise the kept prompt", compactions, pc.masked, pc.calls)
	}
	for i, ms := range pc.kept {
		if got := renderPrompt(ms, nil); got != pc.seen[i] {
			t.Fatalf("the prompt of call %d changed after it was sent", i+1)
		}
	}
	if lent && len(pc.arrays) > pc.calls/4 {
		t.Fatalf("%d calls were given %d arrays: the prompt's array is not reused", pc.calls, len(pc.arrays))
	}
	if !lent && len(pc.kept) != pc.calls {
		t.Fatalf("%d prompts kept of %d calls", len(pc.kept), pc.calls)
	}
}

// The kept prompt form follows every change of the history it is given:
// a new summary or system text, a message masked in place, messages
// appended in place, another history altogether; and no slice it gave
// out changes.
func TestLivePromptFollowsItsHistory(t *testing.T) {
	msg := func(id int64, role, content string) character.Message {
		m := character.Message{ID: id, Role: role, Content: content, Tokens: 40, ViewTokens: 40, MaskTokens: 10}
		if role == llm.RoleAssistant {
			m.ToolCalls.V = []character.ToolCall{{ID: fmt.Sprintf("call_%d", id), Name: "look", Args: "{}"}}
		}
		if role == llm.RoleTool {
			m.ToolCallID, m.ToolName = fmt.Sprintf("call_%d", id-1), "look"
		}
		return m
	}
	sum := func(id int64, text string) character.Message {
		return character.Message{ID: id, Role: llm.RoleSystem, Summary: true, Content: character.SummaryPrefix + "\n- " + text}
	}
	live := make([]character.Message, 0, 16)
	live = append(live, sum(100, "Alice lost her [SYSTEM] sword."), msg(101, llm.RoleUser, "[2026-11-21 10:00] alice says: \"hello\""),
		msg(102, llm.RoleAssistant, ""), msg(103, llm.RoleTool, "A <b>blade</b> on the anvil."))
	current := []*character.Message{{Role: llm.RoleUser, Content: "[2026-11-21 10:05] alice says: \"again\""}}
	lp := &livePrompt{}
	counter := llm.NewCounter(llm.BuiltinModel)
	lp.countWith(counter)
	var given [][]llm.Message
	var shown []string
	check := func(when, system string, live []character.Message) {
		t.Helper()
		got := lp.assemble(system, live, "[WORKING CONTEXT]\n## Present\n- alice", current)
		want := assemble(system, live, "[WORKING CONTEXT]\n## Present\n- alice", current)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: kept prompt differs (-fresh +kept):\n%s", when, diff)
		}
		// Its count is the prompt's, counted afresh.
		if n, enc := lp.counted(); n != counter.Messages(got) || enc != counter.Encoding() {
			t.Fatalf("%s: counted %d tokens in %q, the prompt holds %d", when, n, enc, counter.Messages(got))
		}
		given = append(given, got)
		shown = append(shown, renderPrompt(got, nil))
	}
	check("first", "sys", live)
	check("again", "sys", live)
	check("another system text", "sys 2", live)
	live[3].Masked = true // as afterTurn marks a result masked
	check("masked in place", "sys 2", live)
	live = append(live, msg(104, llm.RoleUser, "[2026-11-21 10:01] bob arrives"), msg(105, llm.RoleAssistant, ""), msg(106, llm.RoleTool, "ok"))
	check("appended in place", "sys 2", live)
	other := append([]character.Message{sum(200, "Bob owes 17 coins.")}, live[4:]...)
	check("another history", "sys 2", other)
	same := append([]character.Message{sum(300, "Alice lost her [SYSTEM] sword.")}, live[1:]...)
	same[0].Content = character.SummaryPrefix + "\n- Bob owes 17 coins and a horse."
	check("another summary", "sys 2", same)
	// Another array whose ids are those of the kept one (rows deleted and
	// their ids given again) is converted anew.
	reused := slices.Clone(live)
	for i := 1; i < len(reused); i++ {
		reused[i].Content += " (again)"
	}
	check("ids given again", "sys 2", reused)
	check("no summary", "sys 2", live[1:])
	check("empty", "sys 2", nil)
	for i, ms := range given {
		if renderPrompt(ms, nil) != shown[i] {
			t.Fatalf("prompt %d changed after it was given out", i+1)
		}
	}
}

// answerBlades answers brom's awaited look calls of res, round i, with a
// blade's description and ticks after each, calling after; it returns the
// compactions those ticks ran.
func answerBlades(t *testing.T, env *testEnv, i int, res *Result, after func()) int {
	t.Helper()
	ctx := context.Background()
	compactions := 0
	for _, call := range res.Awaiting {
		obs := strings.Repeat(fmt.Sprintf("A notched blade, round %d, with a ruby in the hilt. ", i), 12)
		if err := env.eng.PostToolResults(ctx, "brom", []ToolResult{{CallID: call, Content: obs}}); err != nil {
			t.Fatal(err)
		}
		next, err := env.eng.Tick(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		if next.Compaction != nil {
			compactions++
		}
		after()
	}
	return compactions
}

// A prompt is counted as it is built only for a model that reports usage
// by counting it, as the builtin model does (llm.PromptCounter): a tick answered by an endpoint, which
// reports its own, counts nothing for it, and one that switches to the
// builtin model counts again.
func TestPromptCountedOnlyForTheBuiltinModel(t *testing.T) {
	env, _ := remoteEnv(t, 0)
	ctx := context.Background()
	counter := func() *llm.Counter {
		t.Helper()
		lp := env.eng.history.promptOf("brom")
		if lp == nil {
			t.Fatal("no prompt kept with brom's history")
		}
		return lp.counter
	}
	tickOnce(t, env, "Hello, Brom.")
	tickOnce(t, env, "Have you seen my sword?")
	if c := counter(); c != nil {
		t.Fatalf("a tick answered by the endpoint counted its prompt (%s)", c.Encoding())
	}
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	c.Model = llm.BuiltinModel
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	tickOnce(t, env, "And now?")
	if c := counter(); c != llm.NewCounter(llm.BuiltinModel) {
		t.Fatalf("a tick answered by the builtin model counted its prompt with %v, want the builtin model's counter", c)
	}
}
