package character_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

func boolPtr(b bool) *bool { return &b }

func TestApplyDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   character.Character
		want func(c *character.Character) // edits the all-defaults NPC into the expected one
	}{
		{
			name: "nothing set",
			want: func(*character.Character) {},
		},
		{
			name: "set values are kept",
			in: character.Character{
				Model: "gpt-4o", ContextWindow: 32000, MaxOutputTokens: 1000, MaxSteps: 2,
				Compaction: character.CompactionSettings{SleepThreshold: 0.5, EmergencyThreshold: 0.9, PreserveRecentMessages: 7, PreserveRatio: 0.1, Target: 0.3},
				Masking: character.MaskingSettings{Enabled: boolPtr(false), KeepRecentTurns: 3, OffloadBytes: 4096,
					ExemptTools: store.NewJSON([]string{"look"})},
				Tools: store.NewJSON([]character.ToolSpec{{Name: "look", Returns: true}}),
			},
			want: func(c *character.Character) {
				c.Model, c.ContextWindow, c.MaxOutputTokens, c.MaxSteps = "gpt-4o", 32000, 1000, 2
				c.Compaction = character.CompactionSettings{SleepThreshold: 0.5, EmergencyThreshold: 0.9, PreserveRecentMessages: 7, PreserveRatio: 0.1, Target: 0.3}
				c.Masking = character.MaskingSettings{Enabled: boolPtr(false), KeepRecentTurns: 3, OffloadBytes: 4096,
					ExemptTools: store.NewJSON([]string{"look"})}
				c.Tools = store.NewJSON([]character.ToolSpec{{Name: "look", Returns: true}})
			},
		},
		{
			// A long debounce raises the default max wait to it.
			name: "auto-tick max wait follows a long debounce",
			in:   character.Character{AutoTick: character.AutoTickSettings{Enabled: true, DebounceMS: 2000}},
			want: func(c *character.Character) {
				c.AutoTick = character.AutoTickSettings{Enabled: true, DebounceMS: 2000, MaxWaitMS: 2000}
			},
		},
		{
			// An explicit empty tool list means "no game tools", not "defaults".
			name: "empty tool list is kept",
			in:   character.Character{Tools: store.NewJSON([]character.ToolSpec{})},
			want: func(c *character.Character) { c.Tools = store.NewJSON([]character.ToolSpec{}) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.ApplyDefaults()
			want := character.Character{
				Model: character.DefaultModel, ContextWindow: character.DefaultContextWindow,
				MaxOutputTokens: character.DefaultMaxOutputTokens, MaxSteps: character.DefaultMaxSteps,
				Compaction: character.CompactionSettings{
					SleepThreshold: character.DefaultSleepThreshold, EmergencyThreshold: character.DefaultEmergencyThreshold,
					PreserveRecentMessages: character.DefaultPreserveRecentMessages, PreserveRatio: character.DefaultPreserveRatio,
					Target: character.DefaultCompactionTarget,
				},
				Masking: character.MaskingSettings{Enabled: boolPtr(true), KeepRecentTurns: character.DefaultKeepRecentTurns,
					OffloadBytes: character.DefaultOffloadBytes, ExemptTools: store.NewJSON([]string{})},
				Tools:    store.NewJSON(character.DefaultTools()),
				AutoTick: character.AutoTickSettings{DebounceMS: character.DefaultAutoTickDebounceMS, MaxWaitMS: character.DefaultAutoTickMaxWaitMS},
			}
			tt.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ApplyDefaults (-want +got):\n%s", diff)
			}
		})
	}
}

// valid returns an NPC that passes Validate.
func valid() *character.Character {
	c := &character.Character{ID: "brom", Name: "Brom", Persona: "You are Brom, the gruff village blacksmith of Oakvale."}
	c.ApplyDefaults()
	return c
}

func TestValidate(t *testing.T) {
	tools := func(names ...string) store.JSON[[]character.ToolSpec] {
		var ts []character.ToolSpec
		for _, n := range names {
			ts = append(ts, character.ToolSpec{Name: n})
		}
		return store.NewJSON(ts)
	}
	many := make([]string, character.MaxTools+1)
	for i := range many {
		many[i] = fmt.Sprintf("tool%d", i)
	}
	tests := []struct {
		name      string
		edit      func(c *character.Character)
		wantField string // "" for valid
	}{
		{"defaults", func(*character.Character) {}, ""},
		{"id with dash and underscore", func(c *character.Character) { c.ID = "old_brom-2" }, ""},
		{"id of 64 characters", func(c *character.Character) { c.ID = strings.Repeat("a", 64) }, ""},
		{"smallest window", func(c *character.Character) { c.ContextWindow = character.MinContextWindow; c.MaxOutputTokens = 16 }, ""},
		{"largest window", func(c *character.Character) { c.ContextWindow = character.MaxContextWindow }, ""},
		{"output of half the window", func(c *character.Character) { c.MaxOutputTokens = c.ContextWindow / 2 }, ""},
		{"thresholds equal", func(c *character.Character) { c.Compaction.SleepThreshold = 0.8 }, ""},
		{"smallest offload", func(c *character.Character) { c.Masking.OffloadBytes = 512 }, ""},
		{"known time zone", func(c *character.Character) { c.Sleep.Timezone = "Europe/Paris" }, ""},
		{"no game tools", func(c *character.Character) { c.Tools = tools() }, ""},
		{"most tools", func(c *character.Character) { c.Tools = tools(many[:character.MaxTools]...) }, ""},

		{"empty id", func(c *character.Character) { c.ID = "" }, "id"},
		{"upper-case id", func(c *character.Character) { c.ID = "Brom" }, "id"},
		{"id with a space", func(c *character.Character) { c.ID = "old brom" }, "id"},
		{"id of 65 characters", func(c *character.Character) { c.ID = strings.Repeat("a", 65) }, "id"},
		{"blank name", func(c *character.Character) { c.Name = "  \t" }, "name"},
		{"long name", func(c *character.Character) { c.Name = strings.Repeat("n", character.MaxNameBytes+1) }, "name"},
		{"blank persona", func(c *character.Character) { c.Persona = "\n" }, "persona"},
		{"long persona", func(c *character.Character) { c.Persona = strings.Repeat("p", character.MaxPersonaBytes+1) }, "persona"},
		{"long model", func(c *character.Character) { c.Model = strings.Repeat("m", 129) }, "model"},
		{"small window", func(c *character.Character) { c.ContextWindow = character.MinContextWindow - 1 }, "context_window"},
		{"huge window", func(c *character.Character) { c.ContextWindow = character.MaxContextWindow + 1 }, "context_window"},
		{"tiny output", func(c *character.Character) { c.MaxOutputTokens = 15 }, "max_output_tokens"},
		{"output over half the window", func(c *character.Character) { c.MaxOutputTokens = c.ContextWindow/2 + 1 }, "max_output_tokens"},
		{"no steps", func(c *character.Character) { c.MaxSteps = 0 }, "max_steps"},
		{"too many steps", func(c *character.Character) { c.MaxSteps = 17 }, "max_steps"},
		{"sleep threshold zero", func(c *character.Character) { c.Compaction.SleepThreshold = 0 }, "compaction.sleep_threshold"},
		{"sleep threshold one", func(c *character.Character) { c.Compaction.SleepThreshold = 1 }, "compaction.sleep_threshold"},
		{"emergency threshold one", func(c *character.Character) { c.Compaction.EmergencyThreshold = 1 }, "compaction.emergency_threshold"},
		{"emergency threshold negative", func(c *character.Character) { c.Compaction.EmergencyThreshold = -0.5 }, "compaction.emergency_threshold"},
		{"sleep above emergency", func(c *character.Character) { c.Compaction.SleepThreshold = 0.85 }, "compaction.sleep_threshold"},
		{"keep no messages", func(c *character.Character) { c.Compaction.PreserveRecentMessages = 0 }, "compaction.preserve_recent_messages"},
		{"keep too many messages", func(c *character.Character) { c.Compaction.PreserveRecentMessages = 10001 }, "compaction.preserve_recent_messages"},
		{"preserve ratio zero", func(c *character.Character) { c.Compaction.PreserveRatio = 0 }, "compaction.preserve_ratio"},
		{"preserve ratio at emergency", func(c *character.Character) { c.Compaction.PreserveRatio = 0.8 }, "compaction.preserve_ratio"},
		{"target too small", func(c *character.Character) { c.Compaction.Target = 0.01 }, "compaction.target"},
		{"target at emergency", func(c *character.Character) { c.Compaction.Target = 0.8 }, "compaction.target"},
		{"keep no turns", func(c *character.Character) { c.Masking.KeepRecentTurns = 0 }, "masking.keep_recent_turns"},
		{"keep too many turns", func(c *character.Character) { c.Masking.KeepRecentTurns = 10001 }, "masking.keep_recent_turns"},
		{"small offload", func(c *character.Character) { c.Masking.OffloadBytes = 511 }, "masking.offload_bytes"},
		{"large offload", func(c *character.Character) { c.Masking.OffloadBytes = 1<<20 + 1 }, "masking.offload_bytes"},
		{"long cron", func(c *character.Character) { c.Sleep.Cron = strings.Repeat("*", 129) }, "sleep.cron"},
		{"long time zone", func(c *character.Character) { c.Sleep.Timezone = strings.Repeat("z", 65) }, "sleep.timezone"},
		{"unknown time zone", func(c *character.Character) { c.Sleep.Timezone = "Mars/Olympus_Mons" }, "sleep.timezone"},
		{"bad scope", func(c *character.Character) { c.Scope = "Zone 1" }, "scope"},
		{"zero debounce", func(c *character.Character) { c.AutoTick.DebounceMS = -1 }, "auto_tick.debounce_ms"},
		{"long debounce", func(c *character.Character) { c.AutoTick.DebounceMS = 60001; c.AutoTick.MaxWaitMS = 70000 }, "auto_tick.debounce_ms"},
		{"max wait below debounce", func(c *character.Character) { c.AutoTick.DebounceMS = 100; c.AutoTick.MaxWaitMS = 99 }, "auto_tick.max_wait_ms"},
		{"long max wait", func(c *character.Character) { c.AutoTick.MaxWaitMS = 600001 }, "auto_tick.max_wait_ms"},
		{"too many tools", func(c *character.Character) { c.Tools = tools(many...) }, "tools"},
		{"bad second tool name", func(c *character.Character) { c.Tools = tools("look", "pick up") }, "tools[1].name"},
		{"empty tool name", func(c *character.Character) { c.Tools = tools("") }, "tools[0].name"},
		{"long tool name", func(c *character.Character) { c.Tools = tools(strings.Repeat("t", 65)) }, "tools[0].name"},
		{"duplicate tool", func(c *character.Character) { c.Tools = tools("look", "say", "look") }, "tools[2].name"},
		{"long tool description", func(c *character.Character) {
			c.Tools = store.NewJSON([]character.ToolSpec{{Name: "look", Description: strings.Repeat("d", 2001)}})
		}, "tools[0].description"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.edit(c)
			err := c.Validate()
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *character.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v (%T), want a *FieldError", err, err)
			}
			if fe.Field != tt.wantField {
				t.Errorf("Validate() field = %q (%v), want %q", fe.Field, err, tt.wantField)
			}
			if fe.Message == "" || !strings.HasPrefix(err.Error(), tt.wantField+": ") {
				t.Errorf("Validate() error text = %q, want it to start with the field and explain", err.Error())
			}
			if !errors.Is(err, character.ErrInvalid) {
				t.Errorf("Validate() = %v, want it to match ErrInvalid", err)
			}
		})
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"brom": true, "a": true, "npc_1-x": true, strings.Repeat("z", 64): true,
		"": false, "Brom": false, "br om": false, "brom!": false, "brôm": false, strings.Repeat("z", 65): false,
	} {
		if got := character.ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestMaskingSettings(t *testing.T) {
	var zero character.MaskingSettings
	if !zero.On() {
		t.Errorf("unset Enabled: On() = false, want true")
	}
	off := character.MaskingSettings{Enabled: boolPtr(false), ExemptTools: store.NewJSON([]string{"look", "map"})}
	if off.On() {
		t.Errorf("Enabled=false: On() = true")
	}
	for tool, want := range map[string]bool{"look": true, "map": true, "say": false, "": false, "Look": false} {
		if got := off.Exempt(tool); got != want {
			t.Errorf("Exempt(%q) = %v, want %v", tool, got, want)
		}
	}
}

func TestBudgetArithmetic(t *testing.T) {
	c := valid()
	c.ContextWindow = 10000
	c.MaxOutputTokens = 500
	c.State = character.State{SystemTokens: 300, ToolTokens: 200, SummaryTokens: 1000, LiveTokens: 5500}
	if got, want := c.ContextTokens(), 7000; got != want {
		t.Errorf("ContextTokens = %d, want %d", got, want)
	}
	if got, want := c.Utilization(), 0.7; got != want {
		t.Errorf("Utilization = %v, want %v", got, want)
	}
	if got, want := c.HistoryBudget(), 10000-300-1000-200-500; got != want {
		t.Errorf("HistoryBudget = %d, want %d", got, want)
	}
	c.ContextWindow = 0
	if got := c.Utilization(); got != 0 {
		t.Errorf("Utilization with no window = %v, want 0", got)
	}
	if got := c.HistoryBudget(); got >= 0 {
		t.Errorf("HistoryBudget with no window = %d, want negative", got)
	}
}

func TestGameTool(t *testing.T) {
	c := valid()
	c.Tools = store.NewJSON([]character.ToolSpec{{Name: "say"}, {Name: "look", Returns: true}})
	got, ok := c.GameTool("look")
	if !ok || got.Name != "look" || !got.Returns {
		t.Errorf("GameTool(look) = %+v, %v", got, ok)
	}
	if got, ok := c.GameTool("journal_write"); ok {
		t.Errorf("GameTool(journal_write) = %+v, want not found", got)
	}
}
