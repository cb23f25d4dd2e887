package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
)

// Budget compares a budget check at 1k and 100k history tokens with
// recounting the live history.
func Budget(ctx context.Context, out io.Writer, h Harness) error {
	a, done, err := h.Open(ctx, Options{})
	if err != nil {
		return err
	}
	defer done()
	sizes := []int{1000, 100000}
	for _, size := range sizes {
		c := benchNPC(fmt.Sprintf("h%d", size))
		c.ContextWindow = 1_000_000
		c.MaxOutputTokens = 512
		if _, err := a.Engine.PutNPC(ctx, c); err != nil {
			return err
		}
		if err := fillHistory(ctx, a, c.ID, size); err != nil {
			return err
		}
	}
	const n = 2000
	check := func(id string) (time.Duration, error) {
		start := time.Now()
		for i := 0; i < n; i++ {
			c, err := a.Chars.Get(ctx, id)
			if err != nil {
				return 0, err
			}
			_ = c.OverEmergency(c.ContextTokens())
		}
		return time.Since(start) / n, nil
	}
	recount := func(id string) (time.Duration, error) {
		counter := a.Engine.Counter("builtin")
		start := time.Now()
		const m = 5
		for i := 0; i < m; i++ {
			live, err := a.Chars.LiveMessages(ctx, id)
			if err != nil {
				return 0, err
			}
			total := 0
			for j := range live {
				total += counter.Message(live[j].Prompt())
			}
			_ = total
		}
		return time.Since(start) / m, nil
	}
	fmt.Fprintln(out, "budget check (running totals) vs recounting the live history")
	var costs []time.Duration
	for _, size := range sizes {
		id := fmt.Sprintf("h%d", size)
		c, _ := a.Chars.Get(ctx, id)
		d, err := check(id)
		if err != nil {
			return err
		}
		r, err := recount(id)
		if err != nil {
			return err
		}
		costs = append(costs, d)
		fmt.Fprintf(out, "  %7d history tokens (%5d messages): budget check %8s   recount %10s\n", c.State.LiveTokens, c.State.LiveMessages, d, r.Round(time.Microsecond))
	}
	fmt.Fprintf(out, "  ratio budget check 100k/1k: %.2f\n", float64(costs[1])/float64(costs[0]))
	return nil
}

// Plan times loading and planning the compaction of a history of
// messages messages.
func Plan(ctx context.Context, out io.Writer, h Harness, messages int) error {
	a, done, err := h.Open(ctx, Options{})
	if err != nil {
		return err
	}
	defer done()
	c := benchNPC("planner")
	c.ContextWindow = 400_000
	if _, err := a.Engine.PutNPC(ctx, c); err != nil {
		return err
	}
	if err := fillMessages(ctx, a, c.ID, messages); err != nil {
		return err
	}
	c, err = a.Chars.Get(ctx, c.ID)
	if err != nil {
		return err
	}
	const n = 20
	var load, plan time.Duration
	var p *sleep.Plan
	for i := 0; i < n; i++ {
		start := time.Now()
		live, err := a.Chars.LiveMessages(ctx, c.ID)
		if err != nil {
			return err
		}
		mid := time.Now()
		p = sleep.NewPlan(c, live, sleep.TriggerManual, "")
		load += mid.Sub(start)
		plan += time.Since(mid)
	}
	fmt.Fprintf(out, "compaction planning on %d live messages (%d tokens)\n", c.State.LiveMessages, c.State.LiveTokens)
	fmt.Fprintf(out, "  load live history %s   plan the cut %s   (span %d messages, kept %d)\n",
		(load / n).Round(time.Microsecond), (plan / n).Round(time.Microsecond), len(p.Span), len(p.Keep))
	return nil
}

// warnings reads the warnings NPC id's state gives now.
func warnings(ctx context.Context, a *World, id string) ([]string, error) {
	c, err := a.Chars.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return tick.Warnings(c), nil
}

// Masking runs the same long conversation with tool observations twice,
// masking on and off, and reports the prompt tokens per tick.
func Masking(ctx context.Context, out, progress io.Writer, h Harness, turns, window, obsBytes int) error {
	room := forgeRoom(obsBytes)
	fmt.Fprintf(out, "%d turns, builtin model, window %d, a look observation (%d bytes) every third turn\n", turns, window, len(room))
	for _, on := range []bool{true, false} {
		a, done, err := h.Open(ctx, Options{})
		if err != nil {
			return err
		}
		c := benchNPC("brom")
		c.ContextWindow = window
		// The default 512-token reply does not fit a small window beside
		// the tools and a summary; a tenth of the window does.
		if window < 4096 {
			c.MaxOutputTokens = window / 10
		}
		c.Masking.Enabled = &on
		c.Tools = store.NewJSON(append(character.DefaultTools(),
			character.ToolSpec{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object"}, Returns: true}))
		if _, err := a.Engine.PutNPC(ctx, c); err != nil {
			done()
			return err
		}
		var prompt, calls, ticksRun int
		var perTick []int
		compactions := map[string]int{}
		// over counts the compactions that left the context above the
		// compaction target, told the number of those whose tick warned
		// why.
		target := sleep.TargetTokens(c)
		var over, told int
		var seen int64 // the newest compaction counted
		for i := 0; i < turns; i++ {
			text := fmt.Sprintf("Turn %d: the north road is busy today.", i)
			if i%3 == 0 {
				text = fmt.Sprintf("Turn %d: can you look around for my sword?", i)
			}
			if _, _, err := a.Engine.PostEvents(ctx, "brom", []tick.EventInput{{Kind: "say", Actor: "alice", Text: text}}); err != nil {
				done()
				return err
			}
			for {
				res, err := a.Engine.Tick(ctx, "brom")
				if err != nil {
					done()
					return err
				}
				if res.Idle {
					break
				}
				// A game ticks an NPC again seconds later, time enough for
				// a compaction started beside the ticks to end first.
				<-a.Engine.Compacting("brom")
				ticksRun++
				prompt += res.Usage.PromptTokens
				calls += res.Usage.LLMCalls
				perTick = append(perTick, res.Usage.PromptTokens)
				// The compactions since the last tick: inside this one, or
				// beside it; the NPC's warnings say why one ended over
				// its target.
				recs, err := a.Compactions(ctx, seen)
				if err != nil {
					done()
					return err
				}
				for _, r := range recs {
					seen = r.ID
					compactions[r.Trigger]++
					if r.TokensAfter > target {
						over++
						if ws, err := warnings(ctx, a, "brom"); err != nil {
							done()
							return err
						} else if slices.ContainsFunc(ws, func(w string) bool { return strings.Contains(w, sleep.OverTarget) }) {
							told++
						}
					}
				}
				if len(res.Awaiting) == 0 {
					break
				}
				var results []tick.ToolResult
				for _, id := range res.Awaiting {
					results = append(results, tick.ToolResult{CallID: id, Content: room})
				}
				if err := a.Engine.PostToolResults(ctx, "brom", results); err != nil {
					done()
					return err
				}
			}
			if progress != nil && (i+1)%100 == 0 {
				fmt.Fprintf(progress, "\rmasking %v: %d/%d turns", on, i+1, turns)
			}
		}
		if progress != nil {
			fmt.Fprintln(progress)
		}
		sort.Ints(perTick)
		summarizer := a.SummarizerCalls()
		fmt.Fprintf(out, "  masking %-5v: %5d ticks, %5d model calls, prompt tokens per tick mean %5d  p50 %5d  p95 %5d, compactions %v, %d ended over the target of %d (%d saying why), summarizer calls %d (%.1f per 1,000 ticks)\n",
			on, ticksRun, calls, prompt/max(1, ticksRun), perTick[len(perTick)/2], perTick[len(perTick)*95/100], compactions, over, target, told, summarizer, per1000(summarizer, ticksRun))
		done()
	}
	return nil
}
