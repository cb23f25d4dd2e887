package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
)

func benchCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure npcd in-process on a temporary database (builtin model)",
	}
	ticksCmd := benchTicksCommand(stdout, stderr)

	budgetCmd := &cobra.Command{
		Use:   "budget",
		Short: "Cost of a budget check at 1k and 100k history tokens, against recounting the history",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchBudget(cmd.Context(), stdout)
		},
	}
	var messages int
	planCmd := &cobra.Command{
		Use:   "plan",
		Short: "Compaction planning time on a long history",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchPlan(cmd.Context(), stdout, messages)
		},
	}
	planCmd.Flags().IntVar(&messages, "messages", 10000, "messages in the history")
	var turns, window, obsBytes int
	maskCmd := &cobra.Command{
		Use:   "masking",
		Short: "Prompt tokens per tick of a long run with tool observations, masking on and off",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchMasking(cmd.Context(), stdout, stderr, turns, window, obsBytes)
		},
	}
	maskCmd.Flags().IntVar(&turns, "turns", 1000, "turns to run")
	maskCmd.Flags().IntVar(&window, "window", 8192, "context window of the NPC")
	maskCmd.Flags().IntVar(&obsBytes, "observation-bytes", 2000, "size of each look observation")
	cmd.AddCommand(ticksCmd, budgetCmd, planCmd, maskCmd, benchTokensCommand(stdout, stderr))
	cmd.AddCommand(benchSleepCommands(stdout)...)
	return cmd
}

// benchApp opens an app on a fresh database in a temporary directory.
func benchApp(ctx context.Context, opt appOptions) (*app, func(), error) {
	return benchAppOn(ctx, "", opt)
}

// benchAppOn is benchApp on the PostgreSQL database at dsn when dsn is not
// empty: the app works in a new schema of it, dropped when done, so runs
// never see each other's NPCs.
func benchAppOn(ctx context.Context, dsn string, opt appOptions) (*app, func(), error) {
	if dsn != "" {
		return benchAppPostgres(ctx, dsn, opt)
	}
	dir, err := os.MkdirTemp("", "npcd-bench-")
	if err != nil {
		return nil, nil, err
	}
	cfg := defaultConfig()
	cfg.DB = filepath.Join(dir, "bench.db")
	a, err := openApp(ctx, cfg, zerolog.Nop(), opt)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return a, func() { a.close(context.Background()); os.RemoveAll(dir) }, nil
}

func benchAppPostgres(ctx context.Context, dsn string, opt appOptions) (*app, func(), error) {
	admin, err := store.Open(ctx, dsn, store.Options{Driver: store.DriverPostgres, MaxOpenConns: 1})
	if err != nil {
		return nil, nil, fmt.Errorf("--db: %w", err)
	}
	schema := fmt.Sprintf("npcd_bench_%d_%d", os.Getpid(), time.Now().UnixNano())
	drop := func() {
		admin.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE")
		store.Close(admin)
	}
	if err := admin.WithContext(ctx).Exec("CREATE SCHEMA " + schema).Error; err != nil {
		drop()
		return nil, nil, fmt.Errorf("--db: %w", err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		drop()
		return nil, nil, fmt.Errorf("--db: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	cfg := defaultConfig()
	cfg.DB, cfg.DBDriver = u.String(), store.DriverPostgres
	a, err := openApp(ctx, cfg, zerolog.Nop(), opt)
	if err != nil {
		drop()
		return nil, nil, err
	}
	return a, func() { a.close(context.Background()); drop() }, nil
}

func benchNPC(id string) *character.Character {
	return &character.Character{ID: id, Name: "Brom", Persona: "You are Brom, the gruff village blacksmith of Oakvale."}
}

// fillMessages appends n messages of plain conversation (two a turn).
func fillMessages(ctx context.Context, a *app, id string, n int) error {
	counter := a.engine.Counter("builtin")
	turn := int64(0)
	for n > 0 {
		var batch []*character.Message
		for i := 0; i < 50 && n > 0; i++ {
			turn++
			batch = append(batch, &character.Message{Role: llm.RoleUser, Turn: turn, Content: fmt.Sprintf("[2026-11-21 10:00] alice says: %q", strings.Repeat("the north road is long and cold ", 3))})
			n--
			if n > 0 {
				batch = append(batch, &character.Message{Role: llm.RoleAssistant, Turn: turn, Content: "Aye, and the wolves are hungry this winter."})
				n--
			}
		}
		if err := a.chars.AppendMessages(ctx, id, batch, counter, 8192); err != nil {
			return err
		}
	}
	return a.chars.UpdateState(ctx, id, map[string]any{"turn": turn})
}

// fillHistory appends turns of plain conversation until the NPC's live
// history holds at least tokens tokens, bypassing the model.
func fillHistory(ctx context.Context, a *app, id string, tokens int) error {
	counter := a.engine.Counter("builtin")
	c, err := a.chars.Get(ctx, id)
	if err != nil {
		return err
	}
	turn := c.State.Turn
	for c.State.LiveTokens < tokens {
		var batch []*character.Message
		for i := 0; i < 50; i++ {
			turn++
			batch = append(batch,
				&character.Message{Role: llm.RoleUser, Turn: turn, Content: fmt.Sprintf("[2026-11-21 10:00] alice says: %q", strings.Repeat("the north road is long and cold ", 3))},
				&character.Message{Role: llm.RoleAssistant, Turn: turn, Content: "Aye, and the wolves are hungry this winter."})
		}
		if err := a.chars.AppendMessages(ctx, id, batch, counter, 8192); err != nil {
			return err
		}
		if c, err = a.chars.Get(ctx, id); err != nil {
			return err
		}
	}
	return a.chars.UpdateState(ctx, id, map[string]any{"turn": turn})
}

func benchBudget(ctx context.Context, out io.Writer) error {
	a, done, err := benchApp(ctx, appOptions{})
	if err != nil {
		return err
	}
	defer done()
	sizes := []int{1000, 100000}
	for _, size := range sizes {
		c := benchNPC(fmt.Sprintf("h%d", size))
		c.ContextWindow = 1_000_000
		c.MaxOutputTokens = 512
		if _, err := a.engine.PutNPC(ctx, c); err != nil {
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
			c, err := a.chars.Get(ctx, id)
			if err != nil {
				return 0, err
			}
			_ = c.OverEmergency(c.ContextTokens())
		}
		return time.Since(start) / n, nil
	}
	recount := func(id string) (time.Duration, error) {
		counter := a.engine.Counter("builtin")
		start := time.Now()
		const m = 5
		for i := 0; i < m; i++ {
			live, err := a.chars.LiveMessages(ctx, id)
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
		c, _ := a.chars.Get(ctx, id)
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

func benchPlan(ctx context.Context, out io.Writer, messages int) error {
	a, done, err := benchApp(ctx, appOptions{})
	if err != nil {
		return err
	}
	defer done()
	c := benchNPC("planner")
	c.ContextWindow = 400_000
	if _, err := a.engine.PutNPC(ctx, c); err != nil {
		return err
	}
	if err := fillMessages(ctx, a, c.ID, messages); err != nil {
		return err
	}
	c, err = a.chars.Get(ctx, c.ID)
	if err != nil {
		return err
	}
	const n = 20
	var load, plan time.Duration
	var p *sleep.Plan
	for i := 0; i < n; i++ {
		start := time.Now()
		live, err := a.chars.LiveMessages(ctx, c.ID)
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

// benchMasking runs the same long conversation with tool observations twice,
// masking on and off, and reports the prompt tokens per tick.
func benchMasking(ctx context.Context, out, progress io.Writer, turns, window, obsBytes int) error {
	room := "You see the forge: an anvil scarred by years of work, a quench tub of black water, tongs and hammers on the wall, " +
		"a rack of half-finished blades, sacks of charcoal, a bellows with a patched leather side, and through the door the muddy square of Oakvale. "
	room = strings.Repeat(room, obsBytes/len(room)+1)[:obsBytes]
	fmt.Fprintf(out, "%d turns, builtin model, window %d, a look observation (%d bytes) every third turn\n", turns, window, len(room))
	for _, on := range []bool{true, false} {
		a, done, err := benchApp(ctx, appOptions{})
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
		if _, err := a.engine.PutNPC(ctx, c); err != nil {
			done()
			return err
		}
		var prompt, calls, ticksRun int
		var perTick []int
		compactions := map[string]int{}
		for i := 0; i < turns; i++ {
			text := fmt.Sprintf("Turn %d: the north road is busy today.", i)
			if i%3 == 0 {
				text = fmt.Sprintf("Turn %d: can you look around for my sword?", i)
			}
			if _, _, err := a.engine.PostEvents(ctx, "brom", []tick.EventInput{{Kind: "say", Actor: "alice", Text: text}}); err != nil {
				done()
				return err
			}
			for {
				res, err := a.engine.Tick(ctx, "brom")
				if err != nil {
					done()
					return err
				}
				if res.Idle {
					break
				}
				ticksRun++
				prompt += res.Usage.PromptTokens
				calls += res.Usage.LLMCalls
				perTick = append(perTick, res.Usage.PromptTokens)
				if res.Compaction != nil {
					compactions[res.Compaction.Trigger]++
				}
				if len(res.Awaiting) == 0 {
					break
				}
				var results []tick.ToolResult
				for _, id := range res.Awaiting {
					results = append(results, tick.ToolResult{CallID: id, Content: room})
				}
				if err := a.engine.PostToolResults(ctx, "brom", results); err != nil {
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
		fmt.Fprintf(out, "  masking %-5v: %5d ticks, %5d model calls, prompt tokens per tick mean %5d  p50 %5d  p95 %5d, compactions %v\n",
			on, ticksRun, calls, prompt/max(1, ticksRun), perTick[len(perTick)/2], perTick[len(perTick)*95/100], compactions)
		done()
	}
	return nil
}
