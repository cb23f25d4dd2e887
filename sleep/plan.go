package sleep

import (
	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
)

// Plan is what one compaction will do. It is computed from a snapshot of the
// live history; Commit archives exactly the rows it names and nothing that
// arrived later.
type Plan struct {
	NPC         string
	Trigger     string
	Instruction string
	// Previous is the live [CONTEXT SUMMARY] this compaction replaces.
	Previous *character.Message
	// Span is the messages to summarize and archive, oldest first. It always
	// ends just before a user message, so no tool call is separated from
	// its result.
	Span []character.Message
	// Keep is the live history that stays, oldest first.
	Keep []character.Message
	// Mask lists tool results inside Keep to mask first: the outputs of a
	// single huge turn that no cut can make fit.
	Mask []int64
	// TokensBefore is the NPC's context size when planned.
	TokensBefore int
	// SpanTokens is what the span costs in the prompt now.
	SpanTokens int
	// SummaryBudget is the most tokens the new summary may take.
	SummaryBudget int
	// Unread is what the tool results the model has not read yet, kept
	// whole in Keep, cost beyond their placeholders.
	Unread int
}

// Empty reports whether the plan compacts nothing.
func (p *Plan) Empty() bool { return p == nil || len(p.Span) == 0 }

// SpanIDs returns the ids to archive: the previous summary, then the span.
func (p *Plan) SpanIDs() []int64 {
	ids := make([]int64, 0, len(p.Span)+1)
	if p.Previous != nil {
		ids = append(ids, p.Previous.ID)
	}
	for _, m := range p.Span {
		ids = append(ids, m.ID)
	}
	return ids
}

// Limits are the sizes a cut works with, in tokens and messages.
type Limits struct {
	// KeepMessages and KeepTokens: the kept suffix is the larger of the last
	// KeepMessages messages and the last KeepTokens tokens.
	KeepMessages int
	KeepTokens   int
	// TargetTokens is the most the kept history should cost; when the
	// preserved suffix is larger, the cut moves to later turn boundaries
	// (always keeping the newest turn).
	TargetTokens int
	// LimitTokens is the most the kept history may cost for the context to
	// stay under the emergency threshold beside the fixed prompt and a
	// summary; only to get under it are results the model has not read yet
	// masked.
	LimitTokens int
}

// LimitsFor derives an NPC's limits: keep the larger of the last N messages
// and the preserve ratio of the window; aim for the kept history plus the
// fixed prompt and a new summary to stay under the compaction target, so
// that the context has room to grow for many ticks before the next one.
func LimitsFor(c *character.Character, summaryBudget int) Limits {
	w := float64(c.ContextWindow)
	fixed := c.State.SystemTokens + c.State.ToolTokens
	target := TargetTokens(c) - fixed - summaryBudget
	limit := int(c.Compaction.EmergencyThreshold*w) - 1 - fixed - summaryBudget - summaryFraming
	return Limits{
		KeepMessages: c.Compaction.PreserveRecentMessages,
		KeepTokens:   int(c.Compaction.PreserveRatio * w),
		TargetTokens: max(target, 0),
		LimitTokens:  max(limit, target, 0),
	}
}

// TargetTokens is the context size a compaction of c aims at: its
// compaction target share of the window.
func TargetTokens(c *character.Character) int {
	t := c.Compaction.Target
	if t <= 0 {
		t = character.DefaultCompactionTarget
	}
	return int(t * float64(c.ContextWindow))
}

// SummaryBudgetFor is the token budget of an NPC's summary: a tenth of the
// window, between 128 and 2048 tokens.
func SummaryBudgetFor(c *character.Character) int {
	return min(2048, max(128, c.ContextWindow/10))
}

// Cut returns the index in ms (the live history without its summary, oldest
// first) where compaction cuts: ms[:cut] is compacted, ms[cut:] kept. The
// cut is always at a turn boundary (a user message), never 0 unless nothing
// can be compacted. It runs in one pass over ms.
func Cut(ms []character.Message, l Limits) int {
	n := len(ms)
	if n == 0 {
		return 0
	}
	// suffix[i] = tokens of ms[i:]
	suffix := make([]int, n+1)
	for i := n - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1] + ms[i].PromptTokens()
	}
	keepFrom := max(0, n-l.KeepMessages)
	if l.KeepTokens > 0 {
		// The largest i whose suffix reaches KeepTokens.
		i := n - 1
		for i > 0 && suffix[i] < l.KeepTokens {
			i--
		}
		keepFrom = min(keepFrom, i)
	}
	cut := 0
	for i := keepFrom; i > 0; i-- {
		if ms[i].Role == llm.RoleUser {
			cut = i
			break
		}
	}
	// Kept part still too big: move forward to later boundaries, keeping
	// at least the newest turn.
	if suffix[cut] > l.TargetTokens {
		for i := cut + 1; i < n; i++ {
			if ms[i].Role != llm.RoleUser {
				continue
			}
			cut = i
			if suffix[i] <= l.TargetTokens {
				break
			}
		}
	}
	return cut
}

// maskToFit returns the tool results in kept to mask, oldest first, until
// the kept history fits target: the way a single huge turn, which no cut can
// split, is made to fit. Masked results stay stored and recallable. Results
// of exempt tools go last: exemption spares them from routine masking, but a
// prompt that cannot be sent at all would be worse. Results the model has
// not read yet (those after the last assistant message) are masked only
// down to limit, the most the kept history may cost for the prompt to be
// sent at all: masking them sooner would hide what the model is about to
// answer, and they are masked routinely once read. unread is what those
// kept whole cost beyond their placeholders.
func maskToFit(kept []character.Message, target, limit int, exempt func(string) bool) (ids []int64, total, unread int) {
	read := len(kept)
	for i := len(kept) - 1; i >= 0; i-- {
		if kept[i].Role == llm.RoleAssistant {
			break
		}
		read = i
	}
	for i := range kept {
		total += kept[i].PromptTokens()
	}
	passes := []struct {
		fresh, exempt bool
		goal          int
	}{{false, false, target}, {false, true, target}, {true, false, limit}, {true, true, limit}}
	for _, pass := range passes {
		for i := range kept {
			if total <= pass.goal {
				break
			}
			m := &kept[i]
			if (i >= read) != pass.fresh || m.Role != llm.RoleTool || m.Masked || m.MaskTokens >= m.ViewTokens || exempt(m.ToolName) != pass.exempt {
				continue
			}
			ids = append(ids, m.ID)
			total -= m.ViewTokens - m.MaskTokens
		}
	}
	masked := map[int64]bool{}
	for _, id := range ids {
		masked[id] = true
	}
	for i := read; i < len(kept); i++ {
		if m := &kept[i]; m.Role == llm.RoleTool && !m.Masked && !masked[m.ID] && m.MaskTokens < m.ViewTokens {
			unread += m.ViewTokens - m.MaskTokens
		}
	}
	return ids, total, unread
}

// NewPlan plans a compaction of live (the NPC's live history, summary
// first if there is one). It returns an empty plan when no cut is possible.
func NewPlan(c *character.Character, live []character.Message, trigger, instruction string) *Plan {
	return newPlan(c, live, trigger, instruction, 0)
}

// NewPlanAhead is NewPlan for a compaction made ahead of need, while the
// context is still growing: the kept history aims foreseen tokens under the
// target and under the preserved share of the window, so that once what is
// foreseen has come (the next tick's messages, the tool results awaited)
// the context is where a compaction made then, with them among the recent
// messages, would leave it. The summary's budget does not give way to
// them.
func NewPlanAhead(c *character.Character, live []character.Message, trigger string, foreseen int) *Plan {
	return newPlan(c, live, trigger, "", max(foreseen, 0))
}

func newPlan(c *character.Character, live []character.Message, trigger, instruction string, foreseen int) *Plan {
	p := &Plan{NPC: c.ID, Trigger: trigger, Instruction: instruction, TokensBefore: c.ContextTokens(), SummaryBudget: SummaryBudgetFor(c)}
	ms := live
	if len(ms) > 0 && ms[0].Summary {
		prev := ms[0]
		p.Previous = &prev
		ms = ms[1:]
	}
	l := LimitsFor(c, p.SummaryBudget)
	l.TargetTokens = max(l.TargetTokens-foreseen, 0)
	l.KeepTokens = max(l.KeepTokens-foreseen, 0)
	cut := Cut(ms, l)
	p.Span = ms[:cut]
	p.Keep = ms[cut:]
	for i := range p.Span {
		p.SpanTokens += p.Span[i].PromptTokens()
	}
	var kept int
	p.Mask, kept, p.Unread = maskToFit(p.Keep, l.TargetTokens, l.LimitTokens, c.Masking.Exempt)
	if cut == 0 {
		p.Previous = nil // nothing replaces it
		return p
	}
	// When the newest turn, which is never split, takes more than the
	// target left it, the summary gives way: it shrinks to what is left
	// under the target (down to MinSummaryBudget), so that the compaction
	// still ends at its target and the next one is as far as it can be.
	// Unread results kept whole do not count: they are masked once read,
	// and a summary cut for them would lose for good what it held.
	left := TargetTokens(c) - c.State.SystemTokens - c.State.ToolTokens - (kept - p.Unread) - summaryFraming
	if left < p.SummaryBudget {
		p.SummaryBudget = max(MinSummaryBudget, left)
	}
	return p
}

// MinSummaryBudget is the least a summary is given when it gives way to
// the newest turn; below it a summary could not hold its sections.
const MinSummaryBudget = 64

// summaryFraming is what the summary message costs beyond its text: the
// message framing and the marker heading it.
const summaryFraming = 12
