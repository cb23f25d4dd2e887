package character

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/npcd/npcd/store"
)

// Defaults applied to settings the game server leaves out.
const (
	DefaultModel                  = "builtin"
	DefaultContextWindow          = 8192
	DefaultMaxOutputTokens        = 512
	DefaultMaxSteps               = 4
	DefaultSleepThreshold         = 0.70
	DefaultEmergencyThreshold     = 0.80
	DefaultCompactionTarget       = 0.50
	DefaultPreserveRecentMessages = 20
	DefaultPreserveRatio          = 0.20
	DefaultKeepRecentTurns        = 10
	DefaultOffloadBytes           = 8 << 10

	MinContextWindow = 1024
	MaxContextWindow = 2_000_000
	MaxPersonaBytes  = 32 << 10
	MaxNameBytes     = 128
	MaxTools         = 64
)

var idPattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// ValidID reports whether id is a valid NPC id: 1–64 of a-z 0-9 _ -.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Character is an NPC: its settings (what the game server PUTs) and its
// running state (what npcd maintains). Settings fields carry the API's JSON
// names; State is never taken from a request.
type Character struct {
	ID              string                 `gorm:"primaryKey;size:64" json:"id"`
	Name            string                 `gorm:"size:128" json:"name"`
	Persona         string                 `json:"persona"`
	Model           string                 `gorm:"size:128" json:"model"`
	ContextWindow   int                    `json:"context_window"`
	MaxOutputTokens int                    `json:"max_output_tokens"`
	MaxSteps        int                    `json:"max_steps"`
	Compaction      CompactionSettings     `gorm:"embedded;embeddedPrefix:compaction_" json:"compaction"`
	Masking         MaskingSettings        `gorm:"embedded;embeddedPrefix:masking_" json:"masking"`
	Sleep           SleepSettings          `gorm:"embedded;embeddedPrefix:sleep_" json:"sleep"`
	Tools           store.JSON[[]ToolSpec] `json:"tools"`
	State           State                  `gorm:"embedded" json:"-"`
	CreatedAt       time.Time              `json:"created_at"`
	UpdatedAt       time.Time              `json:"updated_at"`
}

// CompactionSettings say when and how much history is compacted.
type CompactionSettings struct {
	// SleepThreshold is the utilization above which a sleep compacts; default 0.70.
	SleepThreshold float64 `json:"sleep_threshold"`
	// EmergencyThreshold is the utilization at which a tick compacts before
	// calling the model; default 0.80.
	EmergencyThreshold float64 `json:"emergency_threshold"`
	// PreserveRecentMessages is the minimum number of newest messages kept
	// live by a compaction; default 20.
	PreserveRecentMessages int `json:"preserve_recent_messages"`
	// PreserveRatio is the minimum share of the window kept live as recent
	// history by a compaction; default 0.20.
	PreserveRatio float64 `json:"preserve_ratio"`
	// Target is the utilization a compaction brings the context down to
	// (or below), so that the next one is many ticks away; default 0.50.
	// The kept recent history shrinks to fit it, down to the newest turn.
	Target float64 `json:"target"`
}

// MaskingSettings control observation masking and tool-result offload.
type MaskingSettings struct {
	// Enabled turns masking of old tool results on; default true.
	Enabled *bool `json:"enabled,omitempty"`
	// KeepRecentTurns is how many recent turns keep their tool results
	// unmasked; default 10.
	KeepRecentTurns int `json:"keep_recent_turns"`
	// ExemptTools are tools whose results are never masked.
	ExemptTools store.JSON[[]string] `json:"exempt_tools"`
	// OffloadBytes is the size above which a tool result is sent as head and
	// tail with a recall id; default 8192.
	OffloadBytes int `json:"offload_bytes"`
}

// On reports whether masking is enabled.
func (m MaskingSettings) On() bool { return m.Enabled == nil || *m.Enabled }

// Exempt reports whether results of tool are never masked.
func (m MaskingSettings) Exempt(tool string) bool {
	for _, t := range m.ExemptTools.V {
		if t == tool {
			return true
		}
	}
	return false
}

// SleepSettings schedule the NPC's sleep. An empty Cron uses the world default.
type SleepSettings struct {
	Cron     string `gorm:"size:128" json:"cron"`
	Timezone string `gorm:"size:64" json:"timezone"`
}

// ToolSpec is a game tool declared by the game server. Parameters is a JSON
// Schema for the arguments; Returns marks tools whose results the game posts
// back (the turn waits for them).
type ToolSpec struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
	Returns     bool           `json:"returns,omitempty"`
}

// State is what npcd keeps about an NPC between ticks. The token totals are
// maintained incrementally by every write to the history, so reading them is
// the whole cost of a budget check.
type State struct {
	Tick             int64 `gorm:"column:tick"`
	Turn             int64 `gorm:"column:turn"`
	LiveTokens       int   `gorm:"column:live_tokens"`    // live messages as sent, summary excluded
	SummaryTokens    int   `gorm:"column:summary_tokens"` // the live [CONTEXT SUMMARY]
	LiveMessages     int   `gorm:"column:live_messages"`  // summary excluded
	ArchivedMessages int   `gorm:"column:archived_messages"`
	SystemTokens     int   `gorm:"column:system_tokens"` // persona and fixed instructions
	ToolTokens       int   `gorm:"column:tool_tokens"`   // tool definitions
	Compactions      int   `gorm:"column:compactions"`
	// Awaiting lists the calls of returns:true tools whose results the game
	// has not posted yet.
	Awaiting store.JSON[[]PendingCall] `gorm:"column:awaiting;type:text"`
	// Resume is set when the game has posted every awaited tool result: the
	// next tick continues the turn even without new events.
	Resume bool `gorm:"column:resume"`
	// GameTime is the latest game time the NPC perceived.
	GameTime    time.Time  `gorm:"column:game_time"`
	LastSleepAt *time.Time `gorm:"column:last_sleep_at"`
	// SleepMark is the newest message id a completed sleep looked at; a sleep
	// with nothing newer is skipped.
	SleepMark int64 `gorm:"column:sleep_mark"`
	// HistoryRev changes, to a fresh random value, with every write to the
	// NPC's messages (append, mask, archive) in the same statement that
	// updates the totals, so a copy of the live history taken at one
	// revision is known current while the revision is unchanged — whichever
	// process wrote.
	HistoryRev int64 `gorm:"column:history_rev"`
	// CompactionNote says why the last compaction could not bring the
	// context down to its target; empty when it did.
	CompactionNote string `gorm:"column:compaction_note"`
}

// PendingCall is a call of a returns:true tool waiting for the game's result.
type PendingCall struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
}

// ContextTokens is the prompt size before working context: fixed system
// text, tool definitions, summary and live history.
func (c *Character) ContextTokens() int {
	return c.State.SystemTokens + c.State.ToolTokens + c.State.SummaryTokens + c.State.LiveTokens
}

// OverEmergency reports whether a prompt of tokens (ContextTokens plus
// what a tick is about to add) reaches the emergency threshold, where the
// tick compacts before calling the model. It is the one statement of that
// rule.
func (c *Character) OverEmergency(tokens int) bool {
	return float64(tokens) >= c.Compaction.EmergencyThreshold*float64(c.ContextWindow)
}

// Utilization is ContextTokens over the window.
func (c *Character) Utilization() float64 {
	if c.ContextWindow <= 0 {
		return 0
	}
	return float64(c.ContextTokens()) / float64(c.ContextWindow)
}

// HistoryBudget is window − system − summary − tool definitions − max output:
// the room left for live history. It may be negative.
func (c *Character) HistoryBudget() int {
	return c.ContextWindow - c.State.SystemTokens - c.State.SummaryTokens - c.State.ToolTokens - c.MaxOutputTokens
}

// ApplyDefaults fills every unset setting with its default.
func (c *Character) ApplyDefaults() {
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.ContextWindow == 0 {
		c.ContextWindow = DefaultContextWindow
	}
	if c.MaxOutputTokens == 0 {
		c.MaxOutputTokens = DefaultMaxOutputTokens
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	cs := &c.Compaction
	if cs.SleepThreshold == 0 {
		cs.SleepThreshold = DefaultSleepThreshold
	}
	if cs.Target == 0 {
		cs.Target = DefaultCompactionTarget
	}
	if cs.EmergencyThreshold == 0 {
		cs.EmergencyThreshold = DefaultEmergencyThreshold
	}
	if cs.PreserveRecentMessages == 0 {
		cs.PreserveRecentMessages = DefaultPreserveRecentMessages
	}
	if cs.PreserveRatio == 0 {
		cs.PreserveRatio = DefaultPreserveRatio
	}
	if c.Masking.Enabled == nil {
		on := true
		c.Masking.Enabled = &on
	}
	if c.Masking.KeepRecentTurns == 0 {
		c.Masking.KeepRecentTurns = DefaultKeepRecentTurns
	}
	if c.Masking.OffloadBytes == 0 {
		c.Masking.OffloadBytes = DefaultOffloadBytes
	}
	if c.Tools.V == nil {
		c.Tools.V = DefaultTools()
	}
	if c.Masking.ExemptTools.V == nil {
		c.Masking.ExemptTools.V = []string{}
	}
}

// DefaultTools are the game tools an NPC gets when it declares none.
func DefaultTools() []ToolSpec {
	return []ToolSpec{
		{Name: "say", Description: "Say something aloud to those present.", Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string", "minLength": 1, "maxLength": 2000}},
			"required": []any{"text"}, "additionalProperties": false}},
		{Name: "emote", Description: "Show an action or expression, e.g. \"nods slowly\".", Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string", "minLength": 1, "maxLength": 500}},
			"required": []any{"text"}, "additionalProperties": false}},
	}
}

// ResolveTool returns the tool t declares: a tool named like a default tool
// (say, emote) with neither parameters nor returns is that default tool,
// with t's description when it gives one; any other tool is itself. The
// HTTP API and scenario files read tools through it, so a bare "say" means
// the same in both.
func ResolveTool(t ToolSpec) ToolSpec {
	if t.Parameters != nil || t.Returns {
		return t
	}
	for _, d := range DefaultTools() {
		if d.Name == t.Name {
			if t.Description != "" {
				d.Description = t.Description
			}
			return d
		}
	}
	return t
}

// FieldError is a validation failure naming the offending field.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Message) }

// Unwrap makes a FieldError match ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// UnfitError is a value that is well formed on its own but cannot work
// with the rest: settings whose fixed part leaves no room for a turn, an
// event dated far from the NPC's clock. It names the field to change and
// says what would fit. It matches ErrInvalid.
type UnfitError struct {
	Field   string
	Message string
}

func (e *UnfitError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Message) }

// Unwrap makes an UnfitError match ErrInvalid.
func (e *UnfitError) Unwrap() error { return ErrInvalid }

// Validate checks settings after ApplyDefaults. It returns a *FieldError.
func (c *Character) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case !ValidID(c.ID):
		return bad("id", "must be 1-64 characters of a-z 0-9 _ -")
	case strings.TrimSpace(c.Name) == "":
		return bad("name", "is required")
	case len(c.Name) > MaxNameBytes:
		return bad("name", "is longer than %d bytes", MaxNameBytes)
	case strings.TrimSpace(c.Persona) == "":
		return bad("persona", "is required")
	case len(c.Persona) > MaxPersonaBytes:
		return bad("persona", "is longer than %d bytes", MaxPersonaBytes)
	case len(c.Model) > 128:
		return bad("model", "is longer than 128 bytes")
	case c.ContextWindow < MinContextWindow || c.ContextWindow > MaxContextWindow:
		return bad("context_window", "must be between %d and %d", MinContextWindow, MaxContextWindow)
	case c.MaxOutputTokens < 16 || c.MaxOutputTokens > c.ContextWindow/2:
		return bad("max_output_tokens", "must be between 16 and half the context window (%d)", c.ContextWindow/2)
	case c.MaxSteps < 1 || c.MaxSteps > 16:
		return bad("max_steps", "must be between 1 and 16")
	}
	cs := c.Compaction
	switch {
	case cs.SleepThreshold <= 0 || cs.SleepThreshold >= 1:
		return bad("compaction.sleep_threshold", "must be between 0 and 1")
	case cs.EmergencyThreshold <= 0 || cs.EmergencyThreshold >= 1:
		return bad("compaction.emergency_threshold", "must be between 0 and 1")
	case cs.SleepThreshold > cs.EmergencyThreshold:
		return bad("compaction.sleep_threshold", "must not exceed emergency_threshold")
	case cs.PreserveRecentMessages < 1 || cs.PreserveRecentMessages > 10000:
		return bad("compaction.preserve_recent_messages", "must be between 1 and 10000")
	case cs.PreserveRatio <= 0 || cs.PreserveRatio >= cs.EmergencyThreshold:
		return bad("compaction.preserve_ratio", "must be above 0 and below emergency_threshold")
	case cs.Target < 0.05 || cs.Target >= cs.EmergencyThreshold:
		return bad("compaction.target", "must be at least 0.05 and below emergency_threshold")
	case c.Masking.KeepRecentTurns < 1 || c.Masking.KeepRecentTurns > 10000:
		return bad("masking.keep_recent_turns", "must be between 1 and 10000")
	case c.Masking.OffloadBytes < 512 || c.Masking.OffloadBytes > 1<<20:
		return bad("masking.offload_bytes", "must be between 512 and 1048576")
	case len(c.Sleep.Cron) > 128:
		return bad("sleep.cron", "is longer than 128 bytes")
	case len(c.Sleep.Timezone) > 64:
		return bad("sleep.timezone", "is longer than 64 bytes")
	}
	if c.Sleep.Timezone != "" {
		if _, err := time.LoadLocation(c.Sleep.Timezone); err != nil {
			return bad("sleep.timezone", "unknown time zone %q", c.Sleep.Timezone)
		}
	}
	if len(c.Tools.V) > MaxTools {
		return bad("tools", "at most %d tools", MaxTools)
	}
	seen := map[string]bool{}
	for i, t := range c.Tools.V {
		f := fmt.Sprintf("tools[%d]", i)
		if !toolNamePattern.MatchString(t.Name) {
			return bad(f+".name", "must be 1-64 characters of a-z A-Z 0-9 _ -")
		}
		if seen[t.Name] {
			return bad(f+".name", "duplicate tool %q", t.Name)
		}
		seen[t.Name] = true
		if len(t.Description) > 2000 {
			return bad(f+".description", "is longer than 2000 bytes")
		}
	}
	return nil
}

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// GameTool returns the declared game tool called name.
func (c *Character) GameTool(name string) (ToolSpec, bool) {
	for _, t := range c.Tools.V {
		if t.Name == name {
			return t, true
		}
	}
	return ToolSpec{}, false
}
