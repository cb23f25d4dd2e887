package tick

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// firstTool calls the first tool it is offered (the game's come first) and
// records the names of the tools each call offered.
type firstTool struct {
	mu      sync.Mutex
	offered [][]string
	system  string // the system message of the last call
}

func (m *firstTool) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	m.mu.Lock()
	m.offered = append(m.offered, names)
	m.system = req.Messages[0].Content
	n := len(m.offered)
	m.mu.Unlock()
	if last := req.Messages[len(req.Messages)-1]; last.Role != llm.RoleUser {
		return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "Done."}}, nil
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant,
		ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("c%d", n), Name: names[0], Arguments: `{}`}}}}, nil
}

func (m *firstTool) last() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.offered[len(m.offered)-1]
}

func gameTool(name string) character.ToolSpec {
	return character.ToolSpec{Name: name, Description: "Do " + name, Parameters: map[string]any{"type": "object"}}
}

// The compiled tools an NPC's ticks use are cached, and a cached set never
// outlives the settings it was compiled from: after a PUT or PATCH through
// the engine, and after another daemon sharing the database replaced the
// NPC's tools, the next tick offers and runs the new tools, never the old.
func TestToolSetFollowsTheNPCsTools(t *testing.T) {
	model := &firstTool{}
	env := openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), model)
	ctx := context.Background()
	put := func(tool string) {
		t.Helper()
		c := brom()
		c.Model = "fake"
		c.Tools = store.NewJSON([]character.ToolSpec{gameTool(tool)})
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	tickWith := func(want string) {
		t.Helper()
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: "Hello there."}}); err != nil {
			t.Fatal(err)
		}
		res, err := env.eng.Tick(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		if got := model.last(); got[0] != want {
			t.Errorf("the model was offered %v, want %s first", got, want)
		}
		if len(res.Actions) != 1 || res.Actions[0].Tool != want || res.InvalidCalls != 0 {
			t.Errorf("actions %+v (%d invalid), want one call of %s", res.Actions, res.InvalidCalls, want)
		}
	}
	put("wave")
	tickWith("wave")
	tickWith("wave")
	put("bow") // as a PUT or PATCH of the API does
	tickWith("bow")

	// Another daemon replaces the tools in the shared database: this
	// engine only sees the row change.
	other := character.NewStore(env.eng.deps.DB)
	c, err := other.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	c.Tools = store.NewJSON([]character.ToolSpec{gameTool("nod")})
	if _, err := other.Put(ctx, c); err != nil {
		t.Fatal(err)
	}
	tickWith("nod")

	// The cache is used: a tick with the settings unchanged compiles
	// nothing and gets the very set it cached.
	c, err = env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	a, err := env.eng.toolSet(c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.eng.toolSet(c)
	if err != nil || a != b {
		t.Errorf("toolSet compiled again for unchanged settings (%p, %p, %v)", a, b, err)
	}
}

// A tick reads an NPC's settings from memory while they are current: after
// a PUT through the engine, another daemon's write of the settings, or a
// delete and create again, the next tick uses the new ones.
func TestTickFollowsTheNPCsSettings(t *testing.T) {
	model := &firstTool{}
	env := openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), model)
	ctx := context.Background()
	npc := func(persona string) *character.Character {
		c := brom()
		c.Model = "fake"
		c.Persona = persona
		c.Tools = store.NewJSON([]character.ToolSpec{gameTool("wave")})
		return c
	}
	tickSees := func(persona string) {
		t.Helper()
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: "Hello there."}}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.eng.Tick(ctx, "brom"); err != nil {
			t.Fatal(err)
		}
		model.mu.Lock()
		system := model.system
		model.mu.Unlock()
		if !strings.Contains(system, persona) {
			t.Errorf("the system prompt %q does not hold the persona %q", system, persona)
		}
	}
	if _, err := env.eng.PutNPC(ctx, npc("You are Brom, a smith.")); err != nil {
		t.Fatal(err)
	}
	tickSees("You are Brom, a smith.")
	tickSees("You are Brom, a smith.")
	if _, err := env.eng.PutNPC(ctx, npc("You are Brom, a retired smith.")); err != nil {
		t.Fatal(err)
	}
	tickSees("You are Brom, a retired smith.")

	// Another daemon's write: this engine only sees the row change.
	other := character.NewStore(env.eng.deps.DB)
	c, err := other.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	c.Persona = "You are Brom, a smith turned farmer."
	if _, err := other.Put(ctx, c); err != nil {
		t.Fatal(err)
	}
	tickSees("You are Brom, a smith turned farmer.")

	// Deleted and created again, by another daemon.
	if err := other.Delete(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	c = npc("You are Brom, the new smith.")
	c.ApplyDefaults()
	if err := other.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	tickSees("You are Brom, the new smith.")
}

// The system prompt is rendered once per settings and kept with the tool
// set; it is used only for the persona and name it was rendered from.
func TestSystemPromptIsKeptWithTheToolSet(t *testing.T) {
	env := openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), &firstTool{})
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	a, b := env.eng.systemPrompt(c), env.eng.systemPrompt(c)
	if a != SystemPrompt(c) || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Errorf("systemPrompt rendered anew or differs from SystemPrompt (%p, %p)", unsafe.StringData(a), unsafe.StringData(b))
	}
	for _, change := range []func(*character.Character){
		func(c *character.Character) { c.Persona = "You are Brom, a retired smith." },
		func(c *character.Character) { c.Name = "Bram" },
	} {
		d := *c
		change(&d)
		if got := env.eng.systemPrompt(&d); got != SystemPrompt(&d) {
			t.Errorf("systemPrompt of changed settings = %q, want %q", got, SystemPrompt(&d))
		}
	}
}
