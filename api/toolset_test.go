package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/npcd/npcd/llm"
)

// callsFirstTool calls the first tool it is offered: the NPC's first game
// tool.
type callsFirstTool struct {
	mu sync.Mutex
	n  int
}

func (m *callsFirstTool) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	m.mu.Lock()
	m.n++
	n := m.n
	m.mu.Unlock()
	if last := req.Messages[len(req.Messages)-1]; last.Role != llm.RoleUser || len(req.Tools) == 0 {
		return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "Done."}}, nil
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant,
		ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("c%d", n), Name: req.Tools[0].Name, Arguments: `{}`}}}}, nil
}

// A tick after a PUT or a PATCH of the NPC's tools offers and runs the new
// tools: the engine's compiled tools never outlive the settings they were
// compiled from.
func TestTickUsesToolsAsPatched(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{remote: &callsFirstTool{}})
	ctx := context.Background()
	tool := func(name string) Tool {
		return Tool{Name: name, Description: "Do " + name, Parameters: map[string]any{"type": "object"}}
	}
	tickCalls := func(want string) {
		t.Helper()
		e.say("brom", "", "Hello there.")
		res, err := e.client.Tick(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Actions) != 1 || res.Actions[0].Tool != want || res.InvalidCalls != 0 {
			t.Errorf("actions %+v (%d invalid), want one call of %s", res.Actions, res.InvalidCalls, want)
		}
	}
	s := bromSettings()
	s.Model = "fake"
	s.Tools = []Tool{tool("wave")}
	e.put("brom", s)
	tickCalls("wave")
	tickCalls("wave")
	if r := e.do("PATCH", "/v1/npcs/brom", `{"tools": [{"name": "bow", "parameters": {"type": "object"}}]}`); r.status != http.StatusOK {
		t.Fatalf("PATCH = %d %s", r.status, r.body)
	}
	tickCalls("bow")
	s.Tools = []Tool{tool("nod")}
	e.put("brom", s)
	tickCalls("nod")
}
