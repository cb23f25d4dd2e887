package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/tick"
)

// Tick outcomes past NPCD_OUTCOME_RETENTION are pruned, on the schedule the
// daemon starts; a key retried within the retention still gets its stored
// answer and ticks nothing, while one past it is gone.
func TestOutcomesArePrunedPastTheirRetention(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	cfg := defaultConfig()
	cfg.DB = filepath.Join(t.TempDir(), "npcd.db")
	cfg.OutcomeRetention = 7 * 24 * time.Hour
	a, err := openApp(ctx, cfg, zerolog.Nop(), appOptions{clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close(context.Background())
	if _, err := a.engine.PutNPC(ctx, &character.Character{ID: "brom", Name: "Brom", Persona: "You are Brom, the blacksmith."}); err != nil {
		t.Fatal(err)
	}
	tickWith := func(event, key string) *tick.Result {
		t.Helper()
		if event != "" {
			if _, _, err := a.engine.PostEvents(ctx, "brom", []tick.EventInput{{ID: event, Kind: "say", Actor: "Alice", Text: "Hello, " + event + "!"}}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := a.engine.TickWithKey(ctx, "brom", key)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	old := tickWith("ev-1", "k-old")
	clock.Advance(6 * 24 * time.Hour)
	recent := tickWith("ev-2", "k-recent")
	if old.Idle || recent.Idle || recent.Tick != old.Tick+1 {
		t.Fatalf("ticks %d and %d (idle %v, %v), want two committed ticks", old.Tick, recent.Tick, old.Idle, recent.Idle)
	}
	clock.Advance(2 * 24 * time.Hour) // k-old is 8 days old, k-recent 2

	if err := a.startUpkeep(); err != nil {
		t.Fatal(err)
	}
	// The schedule prunes at once when it starts.
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := a.chars.OutcomeByKey(ctx, "brom", "k-old")
		if errors.Is(err, character.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outcome past retention is still there (%v)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := a.engine.Outcome(ctx, "brom", old.Tick); !errors.Is(err, character.ErrNotFound) {
		t.Errorf("tick %d past retention: %v, want not found", old.Tick, err)
	}
	again := tickWith("", "k-recent")
	if again.Tick != recent.Tick || again.Idle {
		t.Errorf("retry of k-recent = tick %d (idle %v), want the stored answer of tick %d", again.Tick, again.Idle, recent.Tick)
	}
	c, err := a.chars.Get(ctx, "brom")
	if err != nil || c.State.Tick != recent.Tick {
		t.Errorf("npc at tick %d (%v) after the retry, want %d: a retried key ticks nothing", c.State.Tick, err, recent.Tick)
	}
	if n, err := a.pruneOutcomes(ctx); err != nil || n != 0 {
		t.Errorf("pruning again = %d, %v; want nothing left to prune", n, err)
	}
}

func TestOutcomeRetentionIsValidated(t *testing.T) {
	for d, ok := range map[time.Duration]bool{0: true, time.Hour: true, 30 * 24 * time.Hour: true, time.Minute: false, -time.Hour: false} {
		cfg := defaultConfig()
		cfg.OutcomeRetention = d
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("retention %s: Validate = %v, want ok %v", d, err, ok)
		}
	}
}
