package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
)

// recordedRun is a database produced by a real run of the engine (builtin
// model, real compactor, sleeps with consolidation) and what was observed
// while it ran.
type recordedRun struct {
	db  string
	npc string
	// live is the live history (summary included) right after each tick,
	// as the engine left it, by tick.
	live  map[int64][]int64
	ticks int64
}

// runOptions shape a run.
type runOptions struct {
	turns      int
	window     int
	sleepEvery int // a sleep after every sleepEvery turns; 0 for none
	lookBytes  int // size of a look observation
}

// runLines are what the people of the run say, with names, places and numbers
// for the diff to find; %d changes with the turn.
var runLines = []string{
	"My brother Tobias owes me %d gold since the fair.",
	"Have you seen the caravan from Westmarch? It was due %d days ago.",
	"The password to the cellar is \"iron tide\", keep it quiet. Door %d.",
	"Can you look around the forge for my hammer? I paid %d silver for it.",
	"Mira from the Rusty Anchor says the bridge toll rose to %d silver.",
	"I lost my sword near the old mill, the one with %d notches.",
	"Captain Hale wants %d arrows by the next moon.",
	"Remember what I told you about Tobias and the %d gold?",
}

var runSpeakers = []string{"alice", "bob", "cara"}

// lookResult is the observation of a look, n bytes long.
func lookResult(n int) string {
	base := "You see the forge: an anvil scarred by years of work, a quench tub of black water, tongs and hammers on the wall, " +
		"a rack of half-finished blades, sacks of charcoal, a bellows with a patched leather side, and through the door the muddy square. "
	for len(base) < n {
		base += base
	}
	return base[:n]
}

// produceRun runs an NPC "brom" with a look tool through o.turns turns
// into a fresh database in dir, and closes it.
func produceRun(tb testing.TB, dir string, o runOptions) *recordedRun {
	tb.Helper()
	ctx := context.Background()
	cfg := defaultConfig()
	cfg.DB = filepath.Join(dir, "npcd.db")
	// The run records the live history after every tick: its compactions
	// run inside the ticks, at a known point, not beside them.
	cfg.BackgroundCompaction = false
	a, err := openApp(ctx, cfg, zerolog.Nop(), appOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	defer a.close(context.Background())
	r := &recordedRun{db: cfg.DB, npc: "brom", live: map[int64][]int64{}}
	c := &character.Character{ID: r.npc, Name: "Brom", Persona: "You are Brom, the gruff village blacksmith of Oakvale.",
		ContextWindow: o.window, MaxOutputTokens: 256}
	c.Tools = store.NewJSON(append(character.DefaultTools(),
		character.ToolSpec{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object"}, Returns: true}))
	if _, err := a.engine.PutNPC(ctx, c); err != nil {
		tb.Fatal(err)
	}
	observe := func(res *tick.Result) {
		live, err := a.chars.LiveMessages(ctx, r.npc)
		if err != nil {
			tb.Fatal(err)
		}
		ids := make([]int64, len(live))
		for i, m := range live {
			ids[i] = m.ID
		}
		r.live[res.Tick] = ids
		r.ticks = res.Tick
	}
	for i := 0; i < o.turns; i++ {
		text := fmt.Sprintf(runLines[i%len(runLines)], 10+i%90)
		ev := tick.EventInput{ID: fmt.Sprintf("evt-%d", i+1), Kind: "say", Actor: runSpeakers[i%len(runSpeakers)], Text: text, Room: "forge"}
		if _, _, err := a.engine.PostEvents(ctx, r.npc, []tick.EventInput{ev}); err != nil {
			tb.Fatal(err)
		}
		for {
			res, err := a.engine.Tick(ctx, r.npc)
			if err != nil {
				tb.Fatal(err)
			}
			if res.Idle {
				break
			}
			observe(res)
			if len(res.Awaiting) == 0 {
				break
			}
			var results []tick.ToolResult
			for _, id := range res.Awaiting {
				results = append(results, tick.ToolResult{CallID: id, Content: lookResult(o.lookBytes)})
			}
			if err := a.engine.PostToolResults(ctx, r.npc, results); err != nil {
				tb.Fatal(err)
			}
		}
		if o.sleepEvery > 0 && (i+1)%o.sleepEvery == 0 {
			if _, err := a.engine.Sleep(ctx, r.npc); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return r
}
