package tick

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tools"
)

func say(t *testing.T, env *testEnv, actor, text string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: actor, Text: text}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.eng.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
}

// recreate deletes brom and creates it again, on a remote model, and
// gives its new life a first event and tick.
func recreate(t *testing.T, env *testEnv) {
	t.Helper()
	ctx := context.Background()
	if err := env.eng.DeleteNPC(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	again := brom()
	again.Model = "gpt-4o-mini"
	again.ContextWindow = 4096
	if _, err := env.eng.PutNPC(ctx, again); err != nil {
		t.Fatal(err)
	}
	say(t, env, "alice", "Good morning, I am new in town.")
}

func TestSleepConsolidatesSupersedesAndSkips(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	say(t, env, "alice", "I live in Oakvale, by the mill.")
	say(t, env, "alice", "I lost my sword at the forge!")
	rep, err := env.eng.Sleep(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	// Alice's two lines, and what Brom said of note in reply.
	if rep.Skipped || rep.Consolidated < 2 || rep.MemoriesAdded < 2 || rep.Extractor != sleep.SummarizerLLM {
		t.Fatalf("first sleep: %+v", rep)
	}
	// Nothing new: skipped cheaply.
	if rep, err = env.eng.Sleep(ctx, "brom"); err != nil || !rep.Skipped {
		t.Fatalf("second sleep: %+v %v", rep, err)
	}
	// The same thing said again is known; a change of home supersedes.
	say(t, env, "alice", "I live in Oakvale, by the mill.")
	say(t, env, "alice", "I moved to Riverton last week.")
	if rep, err = env.eng.Sleep(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	if rep.MemoriesSkipped < 1 || rep.MemoriesSuperseded != 1 {
		t.Fatalf("third sleep: %+v, want the repeated line skipped and 1 superseding fact", rep)
	}
	all, err := env.jour.Memories(ctx, "brom", journal.MemoryQuery{Entity: "alice", Key: "home", Superseded: true})
	if err != nil {
		t.Fatal(err)
	}
	// The repeated line is kept once, citing both times it was said.
	if len(all) > 0 && len(all[0].Sources.V.MessageIDs) != 2 {
		t.Fatalf("the Oakvale memory cites messages %v, want both lines", all[0].Sources.V.MessageIDs)
	}
	if len(all) != 2 || all[0].Current() || !all[1].Current() || all[0].SupersededBy == nil || *all[0].SupersededBy != all[1].ID ||
		!strings.Contains(all[1].Content, "Riverton") {
		t.Fatalf("home memories: %+v", all)
	}
	facts, err := env.chars.Facts(ctx, "brom", "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	var current []string
	for _, f := range facts {
		if f.SupersededAt == nil {
			current = append(current, f.Content)
		}
	}
	if len(facts) != 3 || len(current) != 2 || !strings.Contains(strings.Join(current, "|"), "Riverton") || strings.Contains(strings.Join(current, "|"), "Oakvale") {
		t.Fatalf("alice's facts: all %d, current %v", len(facts), current)
	}
	// Every entry is consolidated once.
	if n, err := env.jour.CountUnconsolidated(ctx, "brom"); err != nil || n != 0 {
		t.Fatalf("unconsolidated left: %d %v", n, err)
	}
}

func TestInterruptedSleepCompletesWithoutDuplicates(t *testing.T) {
	f := newFakeProvider(t)
	var mu sync.Mutex
	var cancel context.CancelFunc
	f.set(func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
		if kind != "extract" {
			return chatty(kind, n, req)
		}
		// The second extraction "crashes" the sleep, the way a dying
		// process cuts it short between two batches.
		if n == 2 {
			mu.Lock()
			if cancel != nil {
				cancel()
			}
			mu.Unlock()
		}
		return 500, `{"error":{"message":"down"}}`, 0
	})
	env, _ := remoteEnvFrom(t, f, 0)
	ctx := context.Background()
	cons, err := sleep.NewConsolidator(sleep.ConsolidatorDeps{DB: env.eng.deps.DB, Characters: env.chars, Journal: env.jour,
		Remote: env.eng.deps.Remote, Builtin: env.eng.deps.Builtin}, sleep.ConsolidatorConfig{BatchSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	env.eng.deps.Sleeper, err = sleep.NewRunner(sleep.RunnerDeps{DB: env.eng.deps.DB, Characters: env.chars, Journal: env.jour,
		Lock: env.eng.deps.Locks, Compactor: env.eng.deps.Compactor.(*sleep.Compactor), Consolidator: cons})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ {
		say(t, env, "alice", fmt.Sprintf("My brother number %d lives in Oakvale and owes me %d gold!", i, i+10))
	}
	before, _ := env.jour.CountUnconsolidated(ctx, "brom")
	sctx, c := context.WithCancel(ctx)
	mu.Lock()
	cancel = c
	mu.Unlock()
	if _, err := env.eng.Sleep(sctx, "brom"); err == nil {
		t.Fatal("the interrupted sleep reported success")
	}
	mid, _ := env.jour.CountUnconsolidated(ctx, "brom")
	if mid != before-5 {
		t.Fatalf("after the interruption %d of %d entries are left, want the first batch of 5 done", mid, before)
	}
	midMems, _ := env.jour.Memories(ctx, "brom", journal.MemoryQuery{})
	rep, err := env.eng.Sleep(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Consolidated != mid {
		t.Fatalf("the resumed sleep consolidated %d, want the %d left", rep.Consolidated, mid)
	}
	mems, _ := env.jour.Memories(ctx, "brom", journal.MemoryQuery{})
	seen := map[string]bool{}
	for _, m := range mems {
		if seen[m.Content] {
			t.Fatalf("memory %q stored twice", m.Content)
		}
		seen[m.Content] = true
	}
	if len(mems) <= len(midMems) {
		t.Fatalf("memories %d after resume, %d before: nothing added", len(mems), len(midMems))
	}
}

func TestSleepCompactionDoesNotBlockTicks(t *testing.T) {
	f := newFakeProvider(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var armed atomic.Bool // only the sleep's summary is slow
	f.set(func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
		if kind == "summary" && armed.Load() {
			select {
			case started <- struct{}{}:
			default:
			}
			<-release // a slow summarizer
		}
		return chatty(kind, n, req)
	})
	env, _ := remoteEnvFrom(t, f, 30*time.Second)
	ctx := context.Background()
	fillPastSleepThreshold(t, env)
	written, _ := env.chars.LatestMessageID(ctx, "brom")
	armed.Store(true)
	done := make(chan *sleep.Report, 1)
	go func() {
		rep, err := env.eng.Sleep(ctx, "brom")
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the sleep never asked for a summary")
	}
	// While the summary is being written, ticks run and write messages.
	for i := 0; i < 3; i++ {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, _, err := env.eng.PostEvents(tctx, "brom", []EventInput{{ID: fmt.Sprintf("during-%d", i), Kind: "say", Actor: "alice", Text: "Are you awake?"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.eng.Tick(tctx, "brom"); err != nil {
			t.Fatalf("a tick during the sleep's summary: %v", err)
		}
		cancel()
	}
	close(release)
	rep := <-done
	if rep == nil || rep.Compaction == nil || rep.Compaction.Trigger != sleep.TriggerSleep {
		t.Fatalf("sleep report %+v, want a sleep compaction", rep)
	}
	// What arrived during the summary is live; what was planned is archived.
	ms, err := env.chars.History(ctx, "brom", character.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID > written && m.State != character.StateLive && !m.Summary {
			t.Fatalf("message %d written during the summary was archived", m.ID)
		}
		if len(m.EventRefs.V) > 0 && strings.HasPrefix(m.EventRefs.V[0], "during-") && m.State != character.StateLive {
			t.Fatalf("event %v lost from the live context", m.EventRefs.V)
		}
	}
	if rep.Compaction.LastMessageID > written {
		t.Fatalf("the compaction archived up to %d, past what existed when it was planned (%d)", rep.Compaction.LastMessageID, written)
	}
	totals, _ := env.chars.Recount(ctx, "brom")
	c, _ := env.chars.Get(ctx, "brom")
	if totals.LiveTokens != c.State.LiveTokens || totals.LiveMessages != c.State.LiveMessages {
		t.Fatalf("running totals drifted: %+v vs %+v", c.State, totals)
	}
	// The mark stays before what the ticks wrote during the sleep, so the
	// next sleep looks at it.
	if c.State.SleepMark != written {
		t.Fatalf("sleep mark %d, want %d: the messages written during the sleep are news for the next one", c.State.SleepMark, written)
	}
}

// A sleep whose only write to the history is its own compaction's summary
// leaves nothing for the next sleep: that one is skipped.
func TestSleepAfterACompactionWithNothingNewIsSkipped(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	fillPastSleepThreshold(t, env)
	rep, err := env.eng.Sleep(ctx, "brom")
	if err != nil || rep.Compaction == nil {
		t.Fatalf("first sleep = %+v, %v; want a compaction", rep, err)
	}
	if rep, err = env.eng.Sleep(ctx, "brom"); err != nil || !rep.Skipped {
		t.Fatalf("second sleep = %+v, %v; want skipped", rep, err)
	}
	say(t, env, "alice", "Good morning!")
	if rep, err = env.eng.Sleep(ctx, "brom"); err != nil || rep.Skipped {
		t.Fatalf("sleep after a tick = %+v, %v; want it not skipped", rep, err)
	}
}

// A fact said before three real compactions is still found by the
// memory_search tool the model calls, from the archive.
func TestMemorySearchFindsAFactSaidBeforeThreeCompactions(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	c := brom()
	c.ContextWindow = 2048
	c.MaxOutputTokens = 256 // the default 512 leaves no room for a turn in 2,048 tokens
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{ID: "evt-key", Kind: "say", Actor: "alice", Text: "I buried the iron key under the old oak by the mill."}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.eng.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	for n := 0; ; n++ {
		say(t, env, "bob", fmt.Sprintf("Day %d on the north road: the wolves howled and the carts were slow.", n))
		recs, err := env.eng.deps.Compactor.(*sleep.Compactor).Records(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) >= 3 {
			break
		}
		if n > 300 {
			t.Fatalf("only %d compactions after %d turns", len(recs), n)
		}
	}
	evs, _ := env.chars.EventsByRef(ctx, "brom", []string{"evt-key"})
	m, err := env.chars.MessageByID(ctx, "brom", *evs[0].MessageID)
	if err != nil || m.State != character.StateArchived {
		t.Fatalf("the fact's message is %v (%v), want it archived", m.State, err)
	}
	res, err := env.eng.deps.Internals.Run(ctx, tools.Call{NPC: "brom", Name: tools.MemorySearch, Args: map[string]any{"query": "where is the iron key buried?", "k": float64(3)}})
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(res.Content, "\n")
	if !strings.Contains(first, "iron key under the old oak") {
		t.Fatalf("memory_search after three compactions:\n%s", res.Content)
	}
}

func TestOnlyTheNPCsCommitmentsAreJournaled(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	say(t, env, "alice", "Hello there!")                       // a greeting back: no commitment
	say(t, env, "alice", "Someone stole my horse last night!") // "I'll keep an eye out for it"
	es, err := env.jour.List(ctx, "brom", journal.ListQuery{Type: journal.TypeNote})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || !strings.Contains(es[0].Content, "keep an eye out") || len(es[0].Sources.V.MessageIDs) != 1 {
		t.Fatalf("notes %+v, want only Brom's promise to look for the horse, citing its message", es)
	}
}

func TestSleepReflectsWhenEnoughHappened(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	say(t, env, "alice", "I lost my sword at the forge!")
	rep, err := env.eng.Sleep(ctx, "brom")
	if err != nil || rep.Reflections != 0 {
		t.Fatalf("a quiet day: %+v %v, want no reflection", rep, err)
	}
	for i := 0; i < 10; i++ {
		say(t, env, "bob", fmt.Sprintf("Wolves killed %d of my sheep and my brother is missing!", i+2))
	}
	if rep, err = env.eng.Sleep(ctx, "brom"); err != nil || rep.Reflections != 1 {
		t.Fatalf("a grim day: %+v %v, want one reflection", rep, err)
	}
	es, err := env.jour.List(ctx, "brom", journal.ListQuery{Type: journal.TypeReflection})
	if err != nil || len(es) != 1 || es[0].Content == "" || len(es[0].Sources.V.JournalIDs) == 0 {
		t.Fatalf("reflections %+v %v, want one citing the entries it reflects on", es, err)
	}
}

// A sleep whose summary is being written when the NPC is deleted and
// created again commits nothing into the new life.
func TestSleepSummaryOverlappingARecreateCommitsNothing(t *testing.T) {
	f := newFakeProvider(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var armed atomic.Bool
	f.set(func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
		if kind == "summary" && armed.Load() {
			select {
			case started <- struct{}{}:
			default:
			}
			<-release
		}
		return chatty(kind, n, req)
	})
	env, _ := remoteEnvFrom(t, f, 30*time.Second)
	ctx := context.Background()
	fillPastSleepThreshold(t, env)
	armed.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := env.eng.Sleep(ctx, "brom")
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the sleep never asked for a summary")
	}
	recreate(t, env)
	close(release)
	if err := <-done; !errors.Is(err, character.ErrNotFound) {
		t.Fatalf("the sleep of the earlier life ended with %v, want not found", err)
	}
	left := rowsOf(t, env.eng.deps.DB, "brom")
	if left["compactions"] > 0 || left["memories"] > 0 {
		t.Fatalf("the new life holds %v, want no compaction and no memory", left)
	}
	ms, err := env.chars.History(ctx, "brom", character.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	// Nor does it mark the new life as slept.
	if c, err := env.chars.Get(ctx, "brom"); err != nil || c.State.SleepMark != 0 || c.State.LastSleepAt != nil {
		t.Fatalf("the new life is marked as slept: %+v %v", c.State, err)
	}
	if len(ms) == 0 || !strings.Contains(ms[0].Content, "new in town") {
		t.Fatalf("the new life's history starts with %+v", ms)
	}
	for _, m := range ms {
		if m.State != character.StateLive || m.Summary {
			t.Fatalf("the new life has message %d in state %s (summary %v)", m.ID, m.State, m.Summary)
		}
	}
}

// What sleep writes cites the game's events: a reflection the events
// behind the entries it reflects on, and a memory consolidated from a
// reflection the same events, so memory_search results point at what
// happened.
func TestSleepKeepsTheEventsBehindWhatItWrites(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		in := EventInput{ID: fmt.Sprintf("ev-%d", i), Kind: "say", Actor: "bob", Text: fmt.Sprintf("Wolves killed %d of my sheep and my brother is missing!", i+2)}
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{in}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.eng.Tick(ctx, "brom"); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := env.eng.Sleep(ctx, "brom"); err != nil || rep.Reflections != 1 {
		t.Fatalf("sleep: %+v %v, want one reflection", rep, err)
	}
	es, err := env.jour.List(ctx, "brom", journal.ListQuery{Type: journal.TypeReflection})
	if err != nil || len(es) != 1 {
		t.Fatalf("reflections %+v %v", es, err)
	}
	refl := es[0]
	want := map[string]bool{}
	for _, id := range refl.Sources.V.JournalIDs {
		e, err := env.jour.Get(ctx, "brom", id)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range e.Sources.V.EventRefs {
			want[r] = true
		}
	}
	if len(want) == 0 {
		t.Fatal("the reflected entries cite no events")
	}
	got := map[string]bool{}
	for _, r := range refl.Sources.V.EventRefs {
		got[r] = true
	}
	for r := range want {
		if !got[r] {
			t.Errorf("reflection cites %v, missing %s", refl.Sources.V.EventRefs, r)
		}
	}
	// The next sleep consolidates the reflection itself.
	if _, err := env.eng.Sleep(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	ms, err := env.jour.Memories(ctx, "brom", journal.MemoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	fromReflection := 0
	for _, m := range ms {
		if !slices.Contains(m.Sources.V.JournalIDs, refl.ID) {
			continue
		}
		fromReflection++
		if len(m.Sources.V.EventRefs) < len(want) {
			t.Errorf("memory %q from the reflection cites events %v, want those of the reflection", m.Content, m.Sources.V.EventRefs)
		}
	}
	if fromReflection == 0 {
		t.Fatal("no memory was consolidated from the reflection")
	}
}

// A relative date in what an NPC perceives is resolved against the event's
// time in the perceived line, the journal entry and the memory made from
// it, so "when did she leave?" finds a date months later.
func TestPerceivedRelativeDatesAreGrounded(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 8, 14, 0, 0, 0, time.UTC) // a Friday
	in := EventInput{ID: "ev-1", Kind: "say", Actor: "alice", Text: "My sister left for the capital yesterday, I promise it's true!", At: at}
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{in}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.eng.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	const want = "yesterday [7 May 2026]"
	msgs, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range msgs {
		found = found || m.Role == "user" && strings.Contains(m.Content, want)
	}
	if !found {
		t.Fatalf("no perceived line holds %q: %+v", want, msgs)
	}
	if _, err := env.eng.Sleep(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	ms, err := env.jour.Memories(ctx, "brom", journal.MemoryQuery{})
	if err != nil || len(ms) == 0 {
		t.Fatalf("memories %v %v", ms, err)
	}
	for _, m := range ms {
		if strings.Contains(m.Content, "yesterday") && !strings.Contains(m.Content, want) {
			t.Errorf("memory %q keeps an ungrounded date", m.Content)
		}
	}
}

// fillPastSleepThreshold has bob tell brom tales until brom's context is past
// the sleep threshold and still below the emergency one.
func fillPastSleepThreshold(t *testing.T, env *testEnv) {
	t.Helper()
	ctx := context.Background()
	c, _ := env.chars.Get(ctx, "brom")
	if c.Utilization() >= 0.72 {
		// Past it already, maybe close to the emergency threshold: start
		// from a compacted context, so that a few more ticks stay below it.
		if _, err := env.eng.Compact(ctx, "brom", ""); err != nil {
			t.Fatal(err)
		}
		c, _ = env.chars.Get(ctx, "brom")
	}
	for i := 0; c.Utilization() < 0.72; i++ {
		say(t, env, "bob", fmt.Sprintf("Tale %d of the long winter on the north road, with wolves and snow and little bread.", i))
		c, _ = env.chars.Get(ctx, "brom")
		if c.Utilization() >= c.Compaction.EmergencyThreshold || i > 500 {
			t.Fatalf("could not reach the sleep threshold without an emergency (%.2f)", c.Utilization())
		}
	}
}

// A sleep's compaction sets the sleep mark in its own transaction: when the
// statement writing the mark fails, nothing of the compaction is stored,
// and when the compaction's last statement fails, the mark is not set.
// A sleep's compaction planned of one life of an NPC is refused once the
// NPC was deleted and created again: the new life keeps its history and
// gets no mark.
func TestSleepCommitRefusesAnotherLife(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	fillPastSleepThreshold(t, env)
	comp := env.eng.deps.Compactor.(*sleep.Compactor)
	c, _ := env.chars.Get(ctx, "brom")
	plan, err := comp.Plan(ctx, c, sleep.TriggerSleep, "")
	if err != nil || plan.Empty() {
		t.Fatalf("plan = %+v, %v", plan, err)
	}
	sum := comp.Summarize(ctx, c, plan, nil)
	if err := env.eng.DeleteNPC(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	tickOnce(t, env, "A new life begins.")
	before, _ := env.chars.Get(ctx, "brom")
	_, err = comp.CommitSleep(ctx, c, plan, sum, sleep.SleepMark{Latest: 1 << 40, At: time.Now()})
	if !errors.Is(err, character.ErrNotFound) {
		t.Fatalf("commit of the old life's plan: %v, want ErrNotFound", err)
	}
	after, _ := env.chars.Get(ctx, "brom")
	if after.State.Compactions != before.State.Compactions || after.State.SleepMark != before.State.SleepMark ||
		after.State.LastSleepAt != nil || after.State.LiveMessages != before.State.LiveMessages || after.State.HistoryRev != before.State.HistoryRev {
		t.Errorf("the new life changed: %+v, was %+v", after.State, before.State)
	}
	if recs, _ := comp.Records(ctx, "brom"); len(recs) != 0 {
		t.Errorf("the new life has %d compactions", len(recs))
	}
}

func TestSleepCompactionAndItsMarkCommitTogether(t *testing.T) {
	for _, fail := range []string{"mark", "record"} {
		t.Run(fail, func(t *testing.T) {
			// The commit's writes of the NPC's row and of the record run
			// as prepared statements on SQLite, which gorm's callbacks do
			// not see: there, the connection fails them.
			var (
				env *testEnv
				log *stmtLog
			)
			if dbtest.Dialect() == store.DriverPostgres {
				env = newEnv(t)
			} else {
				env, log = countingEnv(t)
			}
			ctx := context.Background()
			if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
				t.Fatal(err)
			}
			fillPastSleepThreshold(t, env)
			comp := env.eng.deps.Compactor.(*sleep.Compactor)
			var armed atomic.Bool
			if log != nil {
				log.failWith(func(q string) error {
					mark := strings.HasPrefix(q, "UPDATE `characters` SET") && strings.Contains(q, "`sleep_mark`")
					record := strings.HasPrefix(q, "UPDATE `compactions` SET") && strings.Contains(q, "`summary_message_id`")
					if armed.Load() && ((fail == "mark" && mark) || (fail == "record" && record)) {
						return errors.New("injected failure")
					}
					return nil
				})
			}
			failing := func(tx *gorm.DB) {
				if !armed.Load() {
					return
				}
				cols, _ := tx.Statement.Dest.(map[string]any)
				_, mark := cols["sleep_mark"]
				_, record := cols["summary_message_id"]
				if (fail == "mark" && mark) || (fail == "record" && record) {
					tx.AddError(errors.New("injected failure"))
				}
			}
			if err := env.eng.deps.DB.Callback().Update().Before("gorm:update").Register("test:fail_sleep_commit", failing); err != nil {
				t.Fatal(err)
			}
			before, _ := env.chars.Get(ctx, "brom")
			recs, _ := comp.Records(ctx, "brom")
			armed.Store(true)
			if _, err := env.eng.Sleep(ctx, "brom"); err == nil {
				t.Fatal("a sleep whose commit failed succeeded")
			}
			armed.Store(false)
			after, _ := env.chars.Get(ctx, "brom")
			if after.State.SleepMark != before.State.SleepMark || after.State.LastSleepAt != nil || after.State.Compactions != before.State.Compactions ||
				after.State.LiveMessages != before.State.LiveMessages {
				t.Errorf("after a failed commit: state %+v, want it as before (%+v)", after.State, before.State)
			}
			if got, _ := comp.Records(ctx, "brom"); len(got) != len(recs) {
				t.Errorf("after a failed commit: %d compactions, want %d", len(got), len(recs))
			}
			rep, err := env.eng.Sleep(ctx, "brom")
			if err != nil || rep.Compaction == nil {
				t.Fatalf("sleep = %+v, %v; want a compaction", rep, err)
			}
			after, _ = env.chars.Get(ctx, "brom")
			latest, _ := env.chars.LatestMessageID(ctx, "brom")
			if after.State.SleepMark != rep.Compaction.SummaryMessageID || latest != rep.Compaction.SummaryMessageID || after.State.LastSleepAt == nil {
				t.Errorf("after the sleep: mark %d, last sleep %v; want the summary %d (latest %d)", after.State.SleepMark, after.State.LastSleepAt,
					rep.Compaction.SummaryMessageID, latest)
			}
		})
	}
}

// A reflection is written whether the last batch is short (in its
// transaction) or full (then on its own, once no entry is left): in both,
// one reflection, citing the entries it reflects on, left unconsolidated.
func TestSleepReflectsAfterAFullLastBatch(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full=%v", full), func(t *testing.T) {
			env := newEnv(t)
			ctx := context.Background()
			if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 10; i++ {
				say(t, env, "bob", fmt.Sprintf("Wolves killed %d of my sheep and my brother is missing!", i+2))
			}
			n, err := env.jour.CountUnconsolidated(ctx, "brom")
			if err != nil {
				t.Fatal(err)
			}
			batch := n + 1
			if full {
				batch = n
			}
			cons, err := sleep.NewConsolidator(sleep.ConsolidatorDeps{DB: env.eng.deps.DB, Characters: env.chars, Journal: env.jour,
				Builtin: env.eng.deps.Builtin}, sleep.ConsolidatorConfig{BatchSize: batch})
			if err != nil {
				t.Fatal(err)
			}
			env.eng.deps.Sleeper, err = sleep.NewRunner(sleep.RunnerDeps{DB: env.eng.deps.DB, Characters: env.chars, Journal: env.jour,
				Lock: env.eng.deps.Locks, Consolidator: cons})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := env.eng.Sleep(ctx, "brom")
			if err != nil || rep.Reflections != 1 || rep.Consolidated != n {
				t.Fatalf("sleep = %+v, %v; want %d entries consolidated and one reflection", rep, err, n)
			}
			es, err := env.jour.List(ctx, "brom", journal.ListQuery{Type: journal.TypeReflection})
			if err != nil || len(es) != 1 || len(es[0].Sources.V.JournalIDs) == 0 || es[0].ConsolidatedAt != nil {
				t.Fatalf("reflections %+v %v, want one, citing entries, unconsolidated", es, err)
			}
			if left, err := env.jour.CountUnconsolidated(ctx, "brom"); err != nil || left != 1 {
				t.Fatalf("unconsolidated after the sleep: %d %v, want the reflection alone", left, err)
			}
		})
	}
}
