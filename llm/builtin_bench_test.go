package llm

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// builtinTickRequest is a tick request shaped like the engine's: a system
// prompt with the rules and a context summary, a live history of earlier
// turns, and the current turn's working context and events.
func builtinTickRequest() Request {
	system := gruffBrom + "\n\nYou are Brom, a character in a living game world. Stay in character at all times.\n" +
		"- Each user message lists what you perceived since your last turn, one event a line.\n" +
		"- Act only through your tools: speak with say, act with emote. Keep replies short and in character.\n" +
		"- [CONTEXT SUMMARY] is your own memory of earlier events; [WORKING CONTEXT] holds who is present and what you recall; what you perceive now follows [NOW]." +
		"\n\n[CONTEXT SUMMARY]\n## Goal\n- Alice wants her sword mended by Friday.\n## People & facts\n- Alice is a traveler from Riverton.\n- Bob owes 12 silver.\n## Open threads\n- Where is the lost hammer?"
	msgs := []Message{{Role: RoleSystem, Content: system}}
	for i := range 12 {
		msgs = append(msgs,
			Message{Role: RoleUser, Content: fmt.Sprintf(`[2026-11-21 10:%02d] alice says: "Turn %d: the horseshoes for my mare, are they ready?"`, i, i)},
			Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: "say", Arguments: `{"text":"Hmph. Tomorrow."}`}}},
			Message{Role: RoleTool, ToolCallID: fmt.Sprintf("call_%d", i), Content: "ok"})
	}
	msgs = append(msgs, Message{Role: RoleUser, Content: "[WORKING CONTEXT]\n## Present\n- alice (player): a traveler. Known: owns a grey mare\n## Recalled\n" +
		"- [2026-11-20] alice says: \"I need a new horseshoe for my mare.\"\n" +
		"- [2026-11-19] (importance 7) I said: Hmph. I remember: the forge is cold\n" +
		"- [2026-11-18] Bob gives you 3 silver\n\n[NOW]\n" +
		`[2026-11-21 11:00] alice says: "Round 7: have you seen my sword, brom?"`})
	return Request{Task: TaskTick, Messages: msgs, Tools: []Tool{sayDef, emoteDef, lookDef, giveDef}}
}

// BenchmarkBuiltinTick answers one tick request with the builtin model,
// its usage counted (every text already in the counter's cache).
func BenchmarkBuiltinTick(b *testing.B) {
	req := builtinTickRequest()
	bt := NewBuiltin()
	ctx := context.Background()
	res, err := bt.Chat(ctx, req)
	if err != nil || len(res.Message.ToolCalls) == 0 || !strings.Contains(res.Message.ToolCalls[0].Arguments, "I remember") {
		b.Fatal(res, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bt.Chat(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuiltinExtract answers one extract request of a sleep's
// consolidation with the builtin model.
func BenchmarkBuiltinExtract(b *testing.B) {
	var entries strings.Builder
	for i := range 40 {
		fmt.Fprintf(&entries, "[%d] (observation, importance %d, 2026-11-21) [2026-11-21 10:%02d] alice says: \"Turn %d: I lost my sword at the forge.\"\n", i+1, i%10, i%60, i)
		fmt.Fprintf(&entries, "[%d] (note, 2026-11-21) Bob gives you %d silver for the horseshoes\n", i+100, i)
	}
	req := extractReq(entries.String())
	bt := NewBuiltin()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bt.Chat(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
