package scenarios

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const bromHeader = `name: test
start: 2026-03-02T09:00:00Z
npc:
  name: Brom
  persona: You are Brom, the gruff village blacksmith of Oakvale.
  tools: [say, emote, {name: look, returns: true}]
steps:
  - event: {id: sword-1, actor: Alice, text: "I lost my sword at the forge, Brom. Could you forge me a new one?"}
    tick: once
`

// failed is a failure reduced to where and what.
type failed struct {
	Line   int
	Expect string
}

func failures(rep *Report) []failed {
	var out []failed
	for _, f := range rep.Failures {
		out = append(out, failed{Line: f.Line, Expect: f.Expect})
	}
	return out
}

func TestRunChecksExpectations(t *testing.T) {
	tests := []struct {
		name   string
		expect string // the expect list of a check step after the header
		want   []failed
	}{
		{"what the NPC did and kept", `
      - action: {tool: say, contains: keep an eye out}
      - action: {tool: say, contains: sword, not: true}
      - action: {contains: "Alice", matches: "(?i)^hm|^aye|^well"}
      - journal: {type: conversation, contains: lost my sword}
      - profile: {entity: alice}
      - memory_search: {query: lost sword forge, contains: sword, k: 3}
      - no_message_lost: true
      - persona: unchanged
      - compactions: {exactly: 0}
      - utilization: {below: 0.5, above: 0.01}
      - awaiting: {not: true}
      - summary: {not: true}
      - warning: {not: true}
      - masked: {exactly: 0}
      - sleeps: {exactly: 0}`, nil},
		{"an action that did not happen", `
      - action: {tool: say, contains: dragon}`, []failed{{11, "action"}}},
		{"a not form that matches", `
      - action: {tool: say, contains: keep an eye out, not: true}`, []failed{{11, "action"}}},
		{"a count too high", `
      - action: {tool: say, at_least: 2}`, []failed{{11, "action"}}},
		{"nothing in the journal", `
      - journal: {type: reflection}`, []failed{{11, "journal"}}},
		{"a memory search that finds nothing", `
      - memory_search: {query: dragon egg, contains: dragon}`, []failed{{11, "memory_search"}}},
		{"no summary yet", `
      - summary: {}`, []failed{{11, "summary"}}},
		{"a profile nobody has", `
      - profile: {entity: Mira}`, []failed{{11, "profile"}}},
		{"no compaction yet", `
      - compactions: {}`, []failed{{11, "compactions"}}},
		{"utilization out of bounds", `
      - utilization: {below: 0.01}`, []failed{{11, "utilization"}}},
		{"no call awaited", `
      - awaiting: {tool: look}`, []failed{{11, "awaiting"}}},
		{"several at once, in order", `
      - action: {tool: emote}
      - journal: {contains: sword}
      - warning: {contains: rewritten}`, []failed{{11, "action"}, {13, "warning"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := runText(t, bromHeader+"  - expect:"+tt.expect+"\n")
			if rep.Error != "" {
				t.Fatalf("run stopped: %s", rep.Error)
			}
			if diff := cmp.Diff(tt.want, failures(rep)); diff != "" {
				t.Errorf("failures (-want +got):\n%s\nall: %+v", diff, rep.Failures)
			}
			if rep.Passed != (len(tt.want) == 0) || rep.Failed != len(tt.want) {
				t.Errorf("passed=%v failed=%d, want %d failures", rep.Passed, rep.Failed, len(tt.want))
			}
		})
	}
}

func TestFailureSaysWhatWasExpectedAndFound(t *testing.T) {
	rep := runText(t, bromHeader+`  - name: ask about dragons
    expect:
      - action: {tool: say, contains: dragon}
`)
	want := []Failure{{Step: "2", StepName: "ask about dragons", Line: 12, Expect: "action",
		Expected: `at least 1 say actions containing "dragon"`}}
	if diff := cmp.Diff(want, rep.Failures, cmpopts.IgnoreFields(Failure{}, "Found")); diff != "" {
		t.Fatalf("failures (-want +got):\n%s", diff)
	}
	if found := rep.Failures[0].Found; !strings.Contains(found, "none of 1 say actions") || !strings.Contains(found, "keep an eye out") {
		t.Errorf("found %q, want the say that was made", found)
	}
}

func TestRunStepsThatChangeTheNPC(t *testing.T) {
	rep := runText(t, bromHeader+`  - name: look around
    event: {actor: Alice, text: "Could you look around for it?"}
    tick: once
    expect:
      - action: {tool: look}
      - awaiting: {tool: look}
  - tool_results: [{tool: look, content: "A sword with a ruby hilt lies under the anvil."}]
    tick: until_idle
    expect:
      - action: {tool: say, contains: ruby hilt}
      - awaiting: {not: true}
  - tool_results: [{tool: look, content: "nothing", optional: true}]
    tick: once
  - repeat:
      count: 30
      as: round
      vars: {who: [Cora, Dunstan]}
      steps:
        - event: {actor: "{{who}}", text: "Round {{round}}: {{npc}}, I need nails."}
          tick: once
        - advance: 1h
    expect:
      - action: {tool: say, at_least: 3}
      - journal: {contains: "Round 3: Brom"}
      - profile: {entity: Dunstan}
  - compact: keep what Alice lost
  - compact
  - compact: true
  - expect:
      - compactions: {trigger: manual, at_least: 1}
      - summary: {contains: sword}
      - no_message_lost: true
  - sleep: true
  - expect:
      - sleeps: {scheduled: false, exactly: 1}
      - memories: {at_least: 1}
      - no_message_lost: true
`)
	if rep.Error != "" || len(rep.Failures) != 0 {
		t.Fatalf("error %q, failures %+v", rep.Error, rep.Failures)
	}
	if rep.Ticks != 33 {
		t.Errorf("%d ticks, want 33 (no tick after the optional result nobody awaited)", rep.Ticks)
	}
	if got := rep.GameEnd.Sub(rep.GameStart).Hours(); got != 30 {
		t.Errorf("game clock moved %vh, want 30h", got)
	}
}

func TestRewriteWarningAfterRepeatedCompactions(t *testing.T) {
	rep := runText(t, bromHeader+`  - repeat:
      count: 3
      as: round
      steps:
        - repeat:
            count: 20
            steps:
              - event: {actor: Alice, text: "Round {{round}}, turn {{i}}: and my shield is dented too."}
                tick: once
        - compact
    expect:
      - compactions: {trigger: manual, exactly: 3}
      - warning: {contains: rewritten 3 times}
`)
	if rep.Error != "" || len(rep.Failures) != 0 {
		t.Fatalf("error %q, failures %+v", rep.Error, rep.Failures)
	}
}

func TestEachWithChecksEveryItemMentioningIt(t *testing.T) {
	rep := runText(t, bromHeader+`  - event: {id: forge-1, actor: Bob, text: "Brom owes Bob 100 gold."}
    tick: once
  - expect:
      - journal: {each_with: 100 gold, matches: "Bob says|you say, Bob"}
      - journal: {each_with: 100 gold, contains: Alice says}
      - profile: {entity: Bob, source: "forge-*", not: true}
`)
	if diff := cmp.Diff([]failed{{14, "journal"}}, failures(rep)); diff != "" {
		t.Fatalf("failures (-want +got):\n%s\nall: %+v", diff, rep.Failures)
	}
	if found := rep.Failures[0].Found; !strings.Contains(found, "that do not") || !strings.Contains(found, `Bob says: \"Brom owes Bob 100 gold.\"`) {
		t.Errorf("found %q, want the entry that does not say it", found)
	}
}

func TestStepThatCannotRunStopsTheScenario(t *testing.T) {
	tests := []struct {
		name, steps, says string
	}{
		{"a result nobody awaits", `  - tool_results: [{tool: look, content: "a forge"}]
  - tick: once
`, "step 2 (line 10): line 10: no call of look is awaited (the NPC awaits nothing)"},
		{"an event id given twice", `  - repeat:
      count: 2
      steps:
        - event: {id: same, actor: Cora, text: "Hello {{i}}"}
`, "step 2.1 (iteration 2 of 2) (line 13): 1 of the events (ids same) were posted before"},
		{"an event the engine refuses", `  - event: {actor: Cora, kind: "a-kind-longer-than-thirty-two-bytes-is-refused"}
`, "events[0].kind: is longer than 32 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := runText(t, bromHeader+tt.steps)
			if !strings.Contains(rep.Error, tt.says) {
				t.Errorf("error %q, want it to say %q", rep.Error, tt.says)
			}
			if rep.Passed {
				t.Error("a scenario that stopped passed")
			}
		})
	}
}

func TestSameScenarioSameReport(t *testing.T) {
	text := bromHeader + `  - repeat:
      count: 30
      vars: {who: [Cora, Dunstan, Alice]}
      steps:
        - event: {actor: "{{who}}", text: "Round {{i}}: {{who}} needs {{i}} nails and a word about the sword."}
          tick: once
        - advance: 20m
  - sleep: true
  - compact: true
  - expect:
      - memory_search: {query: sword nails, contains: sword, k: 3}
      - action: {contains: dragon}
`
	first, second := runText(t, text), runText(t, text)
	if diff := cmp.Diff(first, second, cmpopts.IgnoreFields(Report{}, "DurationMS")); diff != "" {
		t.Errorf("two runs differ (-first +second):\n%s", diff)
	}
	if first.Failed != 1 || first.Ticks != 31 {
		t.Errorf("failed %d ticks %d, want 1 failure and 31 ticks", first.Failed, first.Ticks)
	}
}

func TestProgressFollowsTheSteps(t *testing.T) {
	sc, err := Parse("p.yaml", []byte(bromHeader+"  - repeat: {count: 2, steps: [{advance: 1h}]}\n  - sleep: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []Progress
	_, err = Run(context.Background(), sc, testEnv(t, sc, ModelBuiltin), Options{Progress: func(p Progress) { got = append(got, p) }})
	if err != nil {
		t.Fatal(err)
	}
	want := []Progress{
		{Step: 1, Steps: 3, Kind: StepEvents},
		{Step: 2, Steps: 3, Kind: StepRepeat},
		{Step: 2, Steps: 3, Kind: StepRepeat, Iteration: 1, Iterations: 2},
		{Step: 2, Steps: 3, Kind: StepRepeat, Iteration: 2, Iterations: 2},
		{Step: 3, Steps: 3, Kind: StepSleep},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

func TestScriptedScenario(t *testing.T) {
	rep := runText(t, `name: scripted
model: scripted
npc:
  name: Maren
  persona: You are Maren, the village elder.
  tools:
    - say
    - {name: check_inventory, returns: true}
script:
  default: {text: ""}
  replies:
    - when: {contains: pelts}
      say: Let me see.
      calls: [{tool: check_inventory}, {tool: journal_write, args: {content: "Alice says she has the pelts.", type: note}}]
    - when: {tool: check_inventory, contains: "3 wolf pelts"}
      say: Here is your reward.
steps:
  - event: {actor: Alice, text: "I have the pelts!"}
    tick: until_idle
    expect:
      - action: {tool: say, contains: Let me see}
      - awaiting: {tool: check_inventory}
      - journal: {type: note, contains: has the pelts}
  - tool_results: [{tool: check_inventory, content: "3 wolf pelts"}]
    tick: once
    expect:
      - action: {tool: say, contains: reward}
      - action: {tool: check_inventory, not: true}
      - no_message_lost: true
  - event: {actor: Alice, text: "Thanks!"}
    tick: once
    expect:
      - action: {exactly: 0}
`)
	if rep.Error != "" || len(rep.Failures) != 0 {
		t.Fatalf("error %q, failures %+v", rep.Error, rep.Failures)
	}
	if rep.Model != ModelScripted {
		t.Errorf("model %q", rep.Model)
	}
}

func TestModelFor(t *testing.T) {
	withScript := &Scenario{File: "a.yaml", Model: ModelScripted, Script: &Script{}}
	noScript := &Scenario{File: "b.yaml", Model: ModelBuiltin}
	tests := []struct {
		name     string
		sc       *Scenario
		override string
		want     string
		bad      bool
	}{
		{"the file's", withScript, "", ModelScripted, false},
		{"overridden", withScript, ModelBuiltin, ModelBuiltin, false},
		{"openai", noScript, ModelOpenAI, ModelOpenAI, false},
		{"scripted without a script", noScript, ModelScripted, "", true},
		{"unknown", noScript, "gpt-5", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ModelFor(tt.sc, tt.override)
			if got != tt.want || (err != nil) != tt.bad {
				t.Errorf("got %q, %v; want %q (error %v)", got, err, tt.want, tt.bad)
			}
		})
	}
}
