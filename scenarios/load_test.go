package scenarios

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// wantErr is one expected validation problem: where, which field, and a
// part of the message.
type wantErr struct {
	Line  int
	Field string
	Says  string
}

func fieldErrors(t *testing.T, err error) []wantErr {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("a validation error does not match ErrInvalid")
	}
	var out []wantErr
	for _, fe := range ve.Errors {
		if fe.File != "broken.yaml" {
			t.Errorf("error names file %q, want broken.yaml", fe.File)
		}
		out = append(out, wantErr{Line: fe.Line, Field: fe.Field, Says: fe.Message})
	}
	return out
}

const header = `name: test
npc:
  name: Brom
  persona: You are Brom, the gruff village blacksmith.
  tools: [say, emote, {name: look, returns: true}]
steps:
`

func TestParseReportsFileLineAndField(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []wantErr
	}{
		{"unknown top-level key", strings.Replace(header, "npc:", "npcs: {}\nnpc:", 1) + "  - tick: once\n", []wantErr{{2, "npcs", "unknown field"}}},
		{"unknown step kind", header + "  - say: {actor: alice, text: hi}\n", []wantErr{{7, "steps[0].say", "unknown step kind"}}},
		{"step with no kind", header + "  - name: nothing\n", []wantErr{{7, "steps[0]", "a step needs one of"}}},
		{"two kinds in one step", header + "  - advance: 1h\n    sleep: true\n", []wantErr{{7, "steps[0]", "a step does one thing"}}},
		{"bad duration", header + "  - advance: three days\n", []wantErr{{7, "steps[0].advance", `"three days" is not a duration`}}},
		{"negative duration", header + "  - advance: 0s\n", []wantErr{{7, "steps[0].advance", "must be positive"}}},
		{"bad regex", header + "  - tick: once\n    expect:\n      - action: {matches: \"(unclosed\"}\n", []wantErr{{9, "steps[0].expect[0].action.matches", "not a regular expression"}}},
		{"repeat without count", header + "  - repeat:\n      steps:\n        - tick: once\n", []wantErr{{8, "steps[0].repeat.count", "is required"}}},
		{"repeat count of the wrong type", header + "  - repeat:\n      count: many\n      steps: [{tick: once}]\n", []wantErr{{8, "steps[0].repeat.count", "must be a whole number"}}},
		{"unknown placeholder", header + "  - event: {actor: alice, text: \"round {{round}}\"}\n", []wantErr{{7, "steps[0].event.text", "unknown placeholder {{round}}"}}},
		{"placeholder outside its repeat", header + "  - repeat: {count: 2, vars: {who: [a, b]}, steps: [{tick: once}]}\n  - event: {actor: \"{{who}}\"}\n", []wantErr{{8, "steps[1].event.actor", "unknown placeholder {{who}}"}}},
		{"memory search without query", header + "  - expect:\n      - memory_search: {contains: ruby}\n", []wantErr{{8, "steps[0].expect[0].memory_search.query", "is required"}}},
		{"memory search without what to find", header + "  - expect:\n      - memory_search: {query: ruby}\n", []wantErr{{8, "steps[0].expect[0].memory_search", "needs contains or matches"}}},
		{"profile without entity", header + "  - expect:\n      - profile: {fact: ruby}\n", []wantErr{{8, "steps[0].expect[0].profile.entity", "is required"}}},
		{"utilization without bound", header + "  - expect:\n      - utilization: {}\n", []wantErr{{8, "steps[0].expect[0].utilization", "needs below or above"}}},
		{"unknown expectation", header + "  - expect:\n      - remembers: {text: ruby}\n", []wantErr{{8, "steps[0].expect[0].remembers", "unknown expectation"}}},
		{"unknown expectation field", header + "  - expect:\n      - journal: {kind: note}\n", []wantErr{{8, "steps[0].expect[0].journal.kind", "unknown field"}}},
		{"not with a count", header + "  - expect:\n      - journal: {contains: x, not: true, at_least: 2}\n", []wantErr{{8, "steps[0].expect[0].journal", "not does not go with a count"}}},
		{"wrong journal type", header + "  - expect:\n      - journal: {type: diary}\n", []wantErr{{8, "steps[0].expect[0].journal.type", `"diary" is not a journal type`}}},
		{"wrong trigger", header + "  - expect:\n      - compactions: {trigger: nightly}\n", []wantErr{{8, "steps[0].expect[0].compactions.trigger", "not a compaction trigger"}}},
		{"wrong type for not", header + "  - expect:\n      - summary: {contains: x, not: maybe}\n", []wantErr{{8, "steps[0].expect[0].summary.not", "must be true or false"}}},
		{"tool the npc lacks", header + "  - tick: once\n    expect:\n      - action: {tool: attack}\n", []wantErr{{9, "steps[0].expect[0].action.tool", `the NPC has no tool "attack"`}}},
		{"result for a fire-and-forget tool", header + "  - tool_results: [{tool: say, content: ok}]\n", []wantErr{{7, "steps[0].tool_results[0].tool", "no returns: true tool"}}},
		{"result without content", header + "  - tool_results: [{tool: look}]\n", []wantErr{{7, "steps[0].tool_results[0].content", "is required"}}},
		{"event with neither text nor actor", header + "  - event: {kind: emote}\n", []wantErr{{7, "steps[0].event", "needs a text or an actor"}}},
		{"bad event time", header + "  - event: {actor: a, at: tomorrow}\n", []wantErr{{7, "steps[0].event.at", "is not a time"}}},
		{"bad tick", header + "  - tick: forever\n", []wantErr{{7, "steps[0].tick", "must be once, until_idle"}}},
		{"no steps", "name: x\nnpc: {name: B, persona: p}\nsteps: []\n", []wantErr{{3, "steps", "at least one step"}}},
		{"missing required keys", "description: nothing\n", []wantErr{{1, "name", "is required"}, {1, "npc", "is required"}, {1, "steps", "is required"}}},
		{"npc setting the engine refuses", "name: x\nnpc:\n  name: B\n  persona: p\n  compaction: {sleep_threshold: 0.9, emergency_threshold: 0.8}\nsteps: [{tick: once}]\n",
			[]wantErr{{5, "npc.compaction.sleep_threshold", "must not exceed emergency_threshold"}}},
		{"bad tool schema", "name: x\nnpc:\n  name: B\n  persona: p\n  tools:\n    - {name: look, parameters: {type: array}}\nsteps: [{tick: once}]\n",
			[]wantErr{{6, "npc.tools[0].parameters", "not a usable JSON Schema"}}},
		{"bad cron", "name: x\nnpc:\n  name: B\n  persona: p\n  sleep: {cron: every night}\nsteps: [{tick: once}]\n",
			[]wantErr{{5, "npc.sleep.cron", "not a cron expression"}}},
		{"window with no room for a turn", "name: x\nnpc:\n  name: B\n  persona: p\n  context_window: 2048\nsteps: [{tick: once}]\n",
			[]wantErr{{5, "npc.context_window", "need a context_window of at least"}}},
		{"npc setting of the wrong type", "name: x\nnpc:\n  name: B\n  persona: p\n  context_window: big\nsteps: [{tick: once}]\n",
			[]wantErr{{5, "npc.context_window", "must be a whole number"}}},
		{"scripted model without a script", "name: x\nmodel: scripted\nnpc: {name: B, persona: p}\nsteps: [{tick: once}]\n",
			[]wantErr{{2, "model", "needs a script section"}}},
		{"unknown model", "name: x\nmodel: gpt\nnpc: {name: B, persona: p}\nsteps: [{tick: once}]\n",
			[]wantErr{{2, "model", "must be builtin, scripted or openai"}}},
		{"scripted call with bad arguments", "name: x\nmodel: scripted\nnpc:\n  name: B\n  persona: p\nscript:\n  replies:\n    - calls: [{tool: say, args: {words: hi}}]\nsteps: [{tick: once}]\n",
			[]wantErr{{8, "script.replies[0].calls[0].args", "do not match its schema"}}},
		{"scripted reply with nothing to say", "name: x\nmodel: scripted\nnpc: {name: B, persona: p}\nscript:\n  replies:\n    - when: {contains: hi}\nsteps: [{tick: once}]\n",
			[]wantErr{{6, "script.replies[0]", "a reply needs say, emote, text or calls"}}},
		{"unclosed placeholder", header + "  - repeat: {count: 2, steps: [{event: {actor: a, text: \"round {{i\"}}]}\n", []wantErr{{7, "steps[0].repeat.steps[0].event.text", "does not close"}}},
		{"x- keys only at the top", strings.Replace(header, "  name: Brom", "  x-note: hi\n  name: Brom", 1) + "  - tick: once\n", []wantErr{{3, "npc.x-note", "unknown field"}}},
		{"key given twice", header + "  - advance: 1h\n    advance: 2h\n", []wantErr{{8, "steps[0].advance", "is given twice"}}},
		{"not yaml", "name: [unclosed\n", []wantErr{{1, "", "not YAML"}}},
		{"several problems at once", header + "  - advance: soon\n  - repeat: {steps: [{tick: once}]}\n  - expect: [{utilization: {below: 2}}]\n",
			[]wantErr{{7, "steps[0].advance", "not a duration"}, {8, "steps[1].repeat.count", "is required"}, {9, "steps[2].expect[0].utilization.below", "between 0 and 1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("broken.yaml", []byte(tt.text))
			got := fieldErrors(t, err)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d errors %+v, want %+v", len(got), got, tt.want)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Line != w.Line || g.Field != w.Field || !strings.Contains(g.Says, w.Says) {
					t.Errorf("error %d: got line %d field %q %q, want line %d field %q saying %q", i, g.Line, g.Field, g.Says, w.Line, w.Field, w.Says)
				}
			}
		})
	}
}

func TestValidationErrorPrintsFileLineAndField(t *testing.T) {
	_, err := Parse("broken.yaml", []byte(header+"  - advance: soon\n"))
	want := `broken.yaml:7:14: steps[0].advance: "soon" is not a duration (like 90s, 45m, 8h, 3d or 1d12h)`
	if got := err.Error(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParseReadsAFullScenario(t *testing.T) {
	text := `name: full
description: every kind of step
start: 2026-03-02T09:00:00Z
model: scripted
scheduled_sleeps: false
npc:
  id: brom-2
  name: Brom
  persona: You are Brom.
  context_window: 4096
  masking: {keep_recent_turns: 3, exempt_tools: [inventory]}
  sleep: {cron: "0 22 * * *", timezone: Europe/Paris}
  tools: [say, {name: look, description: Look around., returns: true}]
script:
  default: {text: ""}
  replies:
    - when: {tool: look, matches: "(?i)anvil"}
      say: An anvil.
      times: 1
steps:
  - events:
      - {actor: alice, text: hello, at: 2026-03-02T09:05:00Z}
      - {kind: arrive, actor: bob}
    tick: until_idle
  - tool_results: [{tool: look, content: "A forge.", optional: true}]
    tick: 2
  - advance: 1d12h
  - sleep: true
  - compact: keep quest details
  - repeat:
      count: 3
      as: n
      vars: {who: [a, b]}
      steps:
        - event: {actor: "{{who}}", text: "round {{n}} for {{npc}}"}
  - expect:
      - utilization: {below: 0.8}
      - compactions: {trigger: manual, exactly: 1}
      - profile: {entity: alice, fact: hello, source: "scenario-*"}
      - no_message_lost: true
      - persona: unchanged
      - masked:
`
	sc, err := Parse("full.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if sc.NPC.ID != "brom-2" || sc.Model != ModelScripted || sc.ScheduledSleeps || !sc.Start.Equal(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("header: %+v", sc)
	}
	var kinds []string
	for _, st := range sc.Steps {
		kinds = append(kinds, st.Kind)
	}
	if diff := cmp.Diff([]string{StepEvents, StepToolResults, StepAdvance, StepSleep, StepCompact, StepRepeat, StepExpect}, kinds); diff != "" {
		t.Errorf("step kinds (-want +got):\n%s", diff)
	}
	if got := sc.Steps[0].Tick; got != (TickMode{UntilIdle: true}) {
		t.Errorf("tick of step 1: %+v", got)
	}
	if got := sc.Steps[1].Tick; got != (TickMode{Count: 2}) {
		t.Errorf("tick of step 2: %+v", got)
	}
	if got := sc.Steps[2].Advance; got != 36*time.Hour {
		t.Errorf("advance: %v", got)
	}
	if got := sc.Steps[4].Instruction.Raw(); got != "keep quest details" {
		t.Errorf("instruction: %q", got)
	}
	rp := sc.Steps[5].Repeat
	ev := rp.Steps[0].Events[0]
	if got := ev.Text.render(map[string]string{"n": "2", "npc": "Brom"}); got != "round 2 for Brom" {
		t.Errorf("rendered text %q", got)
	}
	if rp.As != "n" || rp.Count != 3 || len(rp.Vars) != 1 || rp.Vars[0].Name != "who" {
		t.Errorf("repeat: %+v", rp)
	}
	if n := len(sc.Steps[6].Expect); n != 6 {
		t.Errorf("%d expectations, want 6", n)
	}
	if len(sc.NPC.Tools.V) != 2 || sc.NPC.Tools.V[0].Parameters == nil || !sc.NPC.Tools.V[1].Returns {
		t.Errorf("tools: %+v", sc.NPC.Tools.V)
	}
	if r := sc.Script.Replies[0]; r.When.Tool != "look" || r.Times != 1 || r.Say != "An anvil." {
		t.Errorf("reply: %+v", r)
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "90s", want: 90 * time.Second},
		{in: "8h", want: 8 * time.Hour},
		{in: "3d", want: 72 * time.Hour},
		{in: "1d12h30m", want: 36*time.Hour + 30*time.Minute},
		{in: "1.5h", want: 90 * time.Minute},
		{in: "d", bad: true},
		{in: "3 days", bad: true},
		{in: "-1h", bad: true},
		{in: "0d", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseDuration(tt.in)
			if (err != nil) != tt.bad || got != tt.want {
				t.Errorf("parseDuration(%q) = %v, %v; want %v (error: %v)", tt.in, got, err, tt.want, tt.bad)
			}
		})
	}
}
