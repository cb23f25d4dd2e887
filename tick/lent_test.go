package tick

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npcd/npcd/llm"
)

// lendingChecker is a model that keeps nothing of the prompts it is given
// (llm.MessagesBorrower). It records the array of each prompt, and checks
// that the prompt is its NPC's alone (every message naming it) and stays
// so while the call lasts, other NPCs' ticks running meanwhile.
type lendingChecker struct {
	t     *testing.T
	inner llm.Chatter
	hold  time.Duration

	mu     sync.Mutex
	arrays []*llm.Message
}

func (*lendingChecker) BorrowsMessages() {}

func (m *lendingChecker) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if req.Task != llm.TaskTick {
		return m.inner.Chat(ctx, req)
	}
	m.mu.Lock()
	m.arrays = append(m.arrays, &req.Messages[0])
	m.mu.Unlock()
	sent := renderPrompt(req.Messages, nil)
	name := ""
	if i := strings.Index(req.Messages[0].Content, "You are "); i >= 0 {
		name, _, _ = strings.Cut(req.Messages[0].Content[i+len("You are "):], ",")
	}
	for _, msg := range req.Messages[1:] {
		if msg.Role == llm.RoleUser && !strings.Contains(msg.Content, "to "+name+".") {
			m.t.Errorf("%s was prompted with another NPC's message: %q", name, msg.Content)
		}
	}
	time.Sleep(m.hold) // others tick meanwhile
	if now := renderPrompt(req.Messages, nil); now != sent {
		m.t.Errorf("%s's prompt changed while its model read it", name)
	}
	return m.inner.Chat(ctx, req)
}

// The arrays the prompts of a model that keeps none are built in are the
// ticks', not the NPCs': NPCs ticked one after another are prompted in one
// array, which no NPC's held history keeps; NPCs ticking at once each have
// their own, which no other tick writes while its model reads it.
func TestLentPromptArraysAreSharedByTicksNotNPCs(t *testing.T) {
	var m *lendingChecker
	env := openEnvDeps(t, filepath.Join(t.TempDir(), "npcd.db"), nil, 0, func(d *Deps) {
		m = &lendingChecker{t: t, inner: d.Builtin}
		d.Builtin = m
	})
	ctx := context.Background()
	names := []string{"Brom", "Cora", "Dunstan", "Elsa"}
	for _, name := range names {
		c := brom()
		c.ID, c.Name, c.Persona = strings.ToLower(name), name, "You are "+name+", a villager of Oakvale."
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	tickAll := func(round int, at func(id string) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, len(names))
		for _, name := range names {
			id := strings.ToLower(name)
			text := fmt.Sprintf("Round %d: a word to %s.", round, name)
			if _, _, err := env.eng.PostEvents(ctx, id, []EventInput{{Kind: "say", Actor: "alice", Text: text}}); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- at(id)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// One after another: one array for all.
	var one sync.Mutex
	for round := 0; round < 6; round++ {
		tickAll(round, func(id string) error {
			one.Lock()
			defer one.Unlock()
			_, err := env.eng.Tick(ctx, id)
			return err
		})
	}
	distinct := map[*llm.Message]bool{}
	for _, a := range m.arrays[len(names):] { // the first round grows it
		distinct[a] = true
	}
	if len(m.arrays) != 6*len(names) || len(distinct) > 2 {
		t.Errorf("%d NPCs ticked in turn were prompted in %d arrays over %d calls, want one shared (two while it grows)", len(names), len(distinct), len(m.arrays))
	}
	for _, name := range names {
		if lp := env.eng.history.promptOf(strings.ToLower(name)); lp == nil || lp.bytes() <= 0 {
			t.Fatalf("%s's prompt form is not held", name)
		}
	}
	if n := env.eng.lent.Len(); n != 1 {
		t.Errorf("after ticks in turn the engine keeps %d prompt arrays, want 1", n)
	}
	kept := env.eng.lent.get()
	for i, msg := range kept[:cap(kept)] {
		if msg.Content != "" || msg.Role != "" {
			t.Fatalf("a kept prompt array still holds message %d: %+v", i, msg)
		}
	}
	env.eng.lent.put(kept)
	// At once: each tick its own array, untouched by the others (the
	// checker, and the race detector, tell).
	m.hold = 20 * time.Millisecond
	for round := 6; round < 9; round++ {
		tickAll(round, func(id string) error {
			_, err := env.eng.Tick(ctx, id)
			return err
		})
	}
	if n := env.eng.lent.Len(); n < 2 || n > len(names) {
		t.Errorf("after %d NPCs ticked at once the engine keeps %d prompt arrays, want one for each tick that ran at once", len(names), n)
	}
}

// lentArrays keeps a bounded number of arrays, none too long, and none
// holding a message alive.
func TestLentArraysAreBounded(t *testing.T) {
	var a lentArrays
	if got := a.get(); got != nil {
		t.Fatalf("an empty lentArrays gave an array of %d", cap(got))
	}
	a.put(make([]llm.Message, 0, maxLentLen+1))
	if a.Len() != 0 {
		t.Errorf("an array of %d messages was kept, over the bound of %d", maxLentLen+1, maxLentLen)
	}
	for i := 0; i < maxLentArrays+10; i++ {
		buf := append(make([]llm.Message, 0, 8), llm.Message{Role: llm.RoleUser, Content: "kept?"})
		a.put(buf)
	}
	if a.Len() != maxLentArrays {
		t.Errorf("%d arrays kept, want the bound of %d", a.Len(), maxLentArrays)
	}
	got := a.get()
	if len(got) != 0 || cap(got) != 8 {
		t.Fatalf("get gave len %d cap %d, want an empty array of 8", len(got), cap(got))
	}
	if got[:1][0].Content != "" {
		t.Errorf("a kept array still holds %q", got[:1][0].Content)
	}
}
