package tick

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/testdb"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tools"
)

type testEnv struct {
	path  string
	chars *character.Store
	jour  *journal.Store
	eng   *Engine
}

func openEnv(t testing.TB, path string, model llm.Chatter) *testEnv {
	t.Helper()
	return openEnvWith(t, path, model, 0)
}

func openEnvWith(t testing.TB, path string, model llm.Chatter, summaryTimeout time.Duration) *testEnv {
	t.Helper()
	return openEnvDeps(t, path, model, summaryTimeout, nil)
}

// openEnvDeps is openEnvWith where adjust, if set, changes the engine's
// dependencies before it is built.
func openEnvDeps(t testing.TB, path string, model llm.Chatter, summaryTimeout time.Duration, adjust func(*Deps)) *testEnv {
	t.Helper()
	return envOnDB(t, testdb.OpenAt(t, path), path, model, summaryTimeout, adjust)
}

// envOnDB is openEnvDeps on db, the database at path.
func envOnDB(t testing.TB, db *gorm.DB, path string, model llm.Chatter, summaryTimeout time.Duration, adjust func(*Deps)) *testEnv {
	t.Helper()
	chars := character.NewStore(db)
	jour := journal.NewStore(db)
	builtin := llm.NewBuiltin()
	comp, err := sleep.NewCompactor(sleep.CompactorDeps{DB: db, Characters: chars, Journal: jour, Remote: model, Builtin: builtin}, sleep.CompactorConfig{SummaryTimeout: summaryTimeout})
	if err != nil {
		t.Fatal(err)
	}
	ret, err := journal.NewRetriever(jour)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := sleep.NewConsolidator(sleep.ConsolidatorDeps{DB: db, Characters: chars, Journal: jour, Similar: ret, Remote: model, Builtin: builtin}, sleep.ConsolidatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	locks := NewLocks()
	sleeps, err := sleep.NewRunner(sleep.RunnerDeps{DB: db, Characters: chars, Journal: jour, Lock: locks, Compactor: comp, Consolidator: cons})
	if err != nil {
		t.Fatal(err)
	}
	deps := Deps{DB: db, Characters: chars, Journal: jour, Internals: tools.NewInternals(ret, chars), Retriever: ret,
		Builtin: builtin, Owners: []Owner{jour, ret, comp}, Compactor: comp, Locks: locks, Sleeper: sleeps}
	if model != nil {
		deps.Remote = model
	}
	if adjust != nil {
		adjust(&deps)
	}
	eng, err := New(deps, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{path: path, chars: chars, jour: jour, eng: eng}
}

func newEnv(t testing.TB) *testEnv {
	return openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), nil)
}

func brom() *character.Character {
	return &character.Character{ID: "brom", Name: "Brom", Persona: "You are Brom, the gruff village blacksmith of Oakvale."}
}

func TestTickSaysSomethingAboutTheEvent(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	created, err := env.eng.PutNPC(ctx, brom())
	if err != nil || !created {
		t.Fatalf("PutNPC: created=%v err=%v", created, err)
	}
	acc, dup, err := env.eng.PostEvents(ctx, "brom", []EventInput{{ID: "evt-1", Kind: "say", Actor: "alice", Text: "I lost my sword at the forge."}})
	if err != nil || acc != 1 || dup != 0 {
		t.Fatalf("PostEvents: %d %d %v", acc, dup, err)
	}
	res, err := env.eng.Tick(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if res.Idle || len(res.Actions) == 0 {
		t.Fatalf("want actions, got %+v", res)
	}
	a := res.Actions[0]
	if text := a.Args["text"].(string); a.Tool != "say" || !strings.Contains(text, "alice") || strings.Contains(text, "sword") {
		t.Fatalf("want a say to alice in Brom's own words (nothing he knows mentions a sword yet), got %+v", a)
	}
	// Now Brom has the sword in mind: his history holds it.
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{ID: "evt-2", Kind: "say", Actor: "alice", Text: "Do you remember my sword?"}}); err != nil {
		t.Fatal(err)
	}
	if res, err = env.eng.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	if text, _ := res.Actions[0].Args["text"].(string); !strings.Contains(text, "I remember") || !strings.Contains(text, "lost my sword") {
		t.Fatalf("want Brom to recall the lost sword, got %+v", res.Actions)
	}
}

func TestIdleTickMakesNoModelCall(t *testing.T) {
	env, f := remoteEnv(t, 0)
	f.set(chatty)
	res, err := env.eng.Tick(context.Background(), "brom")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Idle || res.Usage.LLMCalls != 0 || len(res.Actions) != 0 {
		t.Fatalf("idle tick: %+v", res)
	}
	if n := f.count("tick"); n != 0 {
		t.Fatalf("idle tick called the provider %d times", n)
	}
}

func TestRepeatedEventIDIsAcceptedOnce(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	ev := EventInput{ID: "evt-9", Kind: "say", Actor: "alice", Text: "Hello there."}
	for i, want := range []int{1, 0} {
		acc, dup, err := env.eng.PostEvents(ctx, "brom", []EventInput{ev})
		if err != nil || acc != want || dup != 1-want {
			t.Fatalf("post %d: accepted %d duplicates %d err %v", i, acc, dup, err)
		}
	}
	if _, err := env.eng.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	// Still a duplicate once consumed.
	acc, dup, err := env.eng.PostEvents(ctx, "brom", []EventInput{ev})
	if err != nil || acc != 0 || dup != 1 {
		t.Fatalf("after consumption: accepted %d duplicates %d err %v", acc, dup, err)
	}
}

func TestModelFailureLeavesEventsPendingAndWritesNothing(t *testing.T) {
	env, f := remoteEnv(t, 0)
	ctx := context.Background()
	before, _ := env.chars.Get(ctx, "brom")
	f.set(func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
		return 500, `{"error":{"message":"down"}}`, 0
	})
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{ID: "lost-sword", Kind: "say", Actor: "alice", Text: "I lost my sword."}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.eng.Tick(ctx, "brom"); llm.CodeOf(err) != llm.CodeUnavailable {
		t.Fatalf("err %v, want unavailable", err)
	}
	after, _ := env.chars.Get(ctx, "brom")
	if after.State.Tick != before.State.Tick || after.State.LiveMessages != before.State.LiveMessages {
		t.Fatalf("a failed tick changed state: tick %d→%d, live %d→%d", before.State.Tick, after.State.Tick, before.State.LiveMessages, after.State.LiveMessages)
	}
	f.set(chatty)
	res, err := env.eng.Tick(ctx, "brom")
	if err != nil || res.Events != 1 {
		t.Fatalf("retry: %+v %v", res, err)
	}
	evs, err := env.chars.EventsByRef(ctx, "brom", []string{"lost-sword"})
	if err != nil || len(evs) != 1 || evs[0].ConsumedAt == nil || evs[0].ConsumedTick != res.Tick {
		t.Fatalf("event after retry: %+v %v", evs, err)
	}
}

func TestInvalidToolCallIsAnsweredNotActed(t *testing.T) {
	env, f := remoteEnv(t, 0)
	f.set(func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
		switch n {
		case 1: // bad arguments, an unknown tool and malformed JSON
			return 200, completion(openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{
				{ID: "b1", Type: "function", Function: openai.FunctionCall{Name: "say", Arguments: `{"txt":"hi"}`}},
				{ID: "b2", Type: "function", Function: openai.FunctionCall{Name: "fly", Arguments: `{}`}},
				{ID: "b3", Type: "function", Function: openai.FunctionCall{Name: "say", Arguments: `{"text": "unterminated`}},
			}}), 0
		case 2:
			return 200, sayCompletion(n, "Let me try that again."), 0
		}
		return 200, textCompletion(""), 0
	})
	res := tickOnce(t, env, "Say something.")
	if res.InvalidCalls != 3 {
		t.Fatalf("invalid calls %d, want 3", res.InvalidCalls)
	}
	if len(res.Actions) != 1 || res.Actions[0].Args["text"] != "Let me try that again." {
		t.Fatalf("actions %+v: only the valid retry may reach the game", res.Actions)
	}
	ms, err := env.chars.History(context.Background(), "brom", character.HistoryQuery{Limit: 12})
	if err != nil {
		t.Fatal(err)
	}
	errs := 0
	for _, m := range ms {
		if m.Role == llm.RoleTool && strings.HasPrefix(m.Content, "error:") {
			errs++
		}
	}
	if errs != 3 {
		t.Fatalf("%d error results stored, want 3 (the model must be told)", errs)
	}
}

func TestReturnsToolWaitsForTheGame(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	c := brom()
	c.Tools.V = append(character.DefaultTools(), character.ToolSpec{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object"}, Returns: true})
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "bob", Text: "Take a look at this blade."}}); err != nil {
		t.Fatal(err)
	}
	res, err := env.eng.Tick(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Awaiting) != 1 {
		t.Fatalf("awaiting %v, want the look call", res.Awaiting)
	}
	call := res.Awaiting[0]
	// Nothing new: the NPC waits, idle.
	if res2, err := env.eng.Tick(ctx, "brom"); err != nil || !res2.Idle || len(res2.Awaiting) != 1 {
		t.Fatalf("tick while waiting: %+v %v", res2, err)
	}
	var ce *ConflictError
	if err := env.eng.PostToolResults(ctx, "brom", []ToolResult{{CallID: "nope", Content: "x"}}); !errors.As(err, &ce) {
		t.Fatalf("unknown call id: %v, want a conflict", err)
	}
	if err := env.eng.PostToolResults(ctx, "brom", []ToolResult{{CallID: call, Content: "A notched blade with a ruby in the hilt."}}); err != nil {
		t.Fatal(err)
	}
	if err := env.eng.PostToolResults(ctx, "brom", []ToolResult{{CallID: call, Content: "again"}}); !errors.As(err, &ce) {
		t.Fatalf("second result for the same call: %v, want a conflict", err)
	}
	res3, err := env.eng.Tick(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if res3.Idle || res3.Usage.LLMCalls == 0 || len(res3.Actions) == 0 || !strings.Contains(fmt.Sprint(res3.Actions[0].Args), "ruby") {
		t.Fatalf("continuation: %+v, want a say about the observed ruby", res3)
	}
}

func TestUnansweredCallGetsPlaceholderWhenEventsArrive(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	c := brom()
	c.Tools.V = append(character.DefaultTools(), character.ToolSpec{Name: "look", Parameters: map[string]any{"type": "object"}, Returns: true})
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"Please look at the door.", "Never mind, hello again."} {
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "bob", Text: text}}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.eng.Tick(ctx, "brom"); err != nil {
			t.Fatal(err)
		}
	}
	live, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	sent := assemble("sys", live, "", nil)
	if err := checkPairs(sent); err != nil {
		t.Fatalf("history sent to the model is invalid: %v", err)
	}
}

func TestStateSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "npcd.db")
	ctx := context.Background()
	first := openEnv(t, path, nil)
	if _, err := first.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := first.eng.PostEvents(ctx, "brom", []EventInput{{ID: "e1", Kind: "say", Actor: "alice", Text: "I lost my sword at the forge."}}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.eng.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := first.eng.PostEvents(ctx, "brom", []EventInput{{ID: "e2", Kind: "say", Actor: "alice", Text: "Did you find it?"}}); err != nil {
		t.Fatal(err)
	}
	if err := first.eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A new engine on the same file sees everything, the pending event included.
	second := openEnv(t, path, nil)
	c, err := second.chars.Get(ctx, "brom")
	if err != nil || c.State.Tick != 1 || c.Name != "Brom" {
		t.Fatalf("after restart: %+v %v", c, err)
	}
	res, err := second.eng.Tick(ctx, "brom")
	if err != nil || res.Tick != 2 || res.Events != 1 {
		t.Fatalf("tick after restart: %+v %v", res, err)
	}
	hits, err := second.jour.Search(ctx, "brom", "sword forge", 3)
	if err != nil || len(hits) == 0 {
		t.Fatalf("journal after restart: %v %v", hits, err)
	}
}

func TestConcurrentTicksConsumeEachEventOnce(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	for _, id := range []string{"brom", "mira"} {
		c := brom()
		c.ID = id
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	const n = 40
	var wg sync.WaitGroup
	errc := make(chan error, 4*n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for _, id := range []string{"brom", "mira"} {
				if _, _, err := env.eng.PostEvents(ctx, id, []EventInput{{ID: fmt.Sprintf("e%d", i), Kind: "say", Actor: "alice", Text: fmt.Sprintf("Message %d", i)}}); err != nil {
					errc <- err
				}
				if _, err := env.eng.Tick(ctx, id); err != nil {
					errc <- err
				}
			}
		}(i)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for _, id := range []string{"brom", "mira"} {
		if _, err := env.eng.Tick(ctx, id); err != nil { // drain what is left
			t.Fatal(err)
		}
		ms, err := env.chars.History(ctx, id, character.HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, m := range ms {
			for _, r := range m.EventRefs.V {
				seen[r]++
			}
		}
		if len(seen) != n {
			t.Fatalf("%s: %d events reached the history, want %d", id, len(seen), n)
		}
		for r, k := range seen {
			if k != 1 {
				t.Fatalf("%s: event %s consumed %d times", id, r, k)
			}
		}
		totals, _ := env.chars.Recount(ctx, id)
		c, _ := env.chars.Get(ctx, id)
		if totals.LiveTokens != c.State.LiveTokens || totals.LiveMessages != c.State.LiveMessages {
			t.Fatalf("%s: running totals drifted: %+v vs %+v", id, c.State, totals)
		}
	}
}
