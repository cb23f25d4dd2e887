package bench

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tick"
)

// World is npcd wired as the daemon wires it, on a fresh temporary
// database: what a measurement drives and reads.
type World struct {
	Engine    *tick.Engine
	Chars     *character.Store
	Journal   *journal.Store
	Retriever *journal.Retriever
	// Sizes reads the sizes of the database and of its write-ahead log
	// (0 when it has none), in bytes.
	Sizes func(ctx context.Context) (db, wal int64, err error)
	// TaskCalls reads how many model calls the world made for a task, as
	// the daemon's npcd_llm_task_calls_total counts them; nil when the
	// world does not count.
	TaskCalls func(task llm.Task) int64
}

// SummarizerCalls is how many summarizer calls w made: one a compaction,
// more when a summary is written in chunks or retried.
func (w *World) SummarizerCalls() int64 {
	if w.TaskCalls == nil {
		return 0
	}
	return w.TaskCalls(llm.TaskSummarize)
}

// Compactions returns the compactions w stored after the one with id
// after (0: all), oldest first: those beside the ticks too, which no tick's
// result reports.
func (w *World) Compactions(ctx context.Context, after int64) ([]sleep.Record, error) {
	var recs []sleep.Record
	if err := w.Chars.DB().WithContext(ctx).Where("id > ?", after).Order("id").Find(&recs).Error; err != nil {
		return nil, fmt.Errorf("read compactions: %w", err)
	}
	return recs, nil
}

// besideSince is how many compactions ran beside an NPC's ticks, which no
// tick reports, between its tick that left its count of compactions at
// last (-1: none seen yet, 0 is then returned) and res, its next: what the
// count gained beyond res's own.
func besideSince(last int, res *tick.Result) int {
	if last < 0 {
		return 0
	}
	own := 0
	if res.Compaction != nil {
		own = 1
	}
	return max(0, res.Context.Compactions-last-own)
}

// per1000 is n per 1,000 of ticks, to one decimal.
func per1000(n int64, ticks int) float64 {
	if ticks <= 0 {
		return 0
	}
	return float64(int(float64(n)*10000/float64(ticks)+0.5)) / 10
}

// Options adjust a World's wiring.
type Options struct {
	// Remote, when set, is the model of NPCs that name one other than
	// builtin (a timed fake in front of the builtin model).
	Remote llm.Chatter
	// TickConfig, when set, adjusts the engine's settings.
	TickConfig func(*tick.Config)
	// DB, when set, is a PostgreSQL URL to measure on, in a schema of
	// its own dropped when done; empty means a new SQLite file.
	DB string
	// IndexCacheMB, when set, bounds the memory search's index cache in
	// MiB, as NPCD_INDEX_CACHE_MB does; 0 keeps the daemon's default.
	IndexCacheMB int
}

// ServeOptions adjust the daemon a Harness serves.
type ServeOptions struct {
	// MaxCalls is the room for model calls at once; 0 keeps the default.
	MaxCalls int
	// IndexCacheMB is as in Options.
	IndexCacheMB int
	// Foreground runs every compaction a tick needs inside it
	// (NPCD_BACKGROUND_COMPACTION=0).
	Foreground bool
}

// Harness is how the measurements get an npcd: cmd/npcd provides both.
type Harness struct {
	// Open wires npcd on a fresh temporary database; done closes it and
	// removes the database.
	Open func(ctx context.Context, opt Options) (w *World, done func(), err error)
	// Serve runs the daemon on a loopback port over a fresh temporary
	// database, as opt says, and returns its address; stop shuts it down
	// and removes the database.
	Serve func(ctx context.Context, opt ServeOptions) (addr string, stop func(), err error)
}

func benchNPC(id string) *character.Character {
	return &character.Character{ID: id, Name: "Brom", Persona: "You are Brom, the gruff village blacksmith of Oakvale."}
}

// fillMessages appends n messages of plain conversation (two a turn).
func fillMessages(ctx context.Context, w *World, id string, n int) error {
	counter := w.Engine.Counter("builtin")
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
		if err := w.Chars.AppendMessages(ctx, id, batch, counter, 8192); err != nil {
			return err
		}
	}
	return w.Chars.UpdateState(ctx, id, map[string]any{"turn": turn})
}

// fillHistory appends turns of plain conversation until the NPC's live
// history holds at least tokens tokens, bypassing the model.
func fillHistory(ctx context.Context, w *World, id string, tokens int) error {
	counter := w.Engine.Counter("builtin")
	c, err := w.Chars.Get(ctx, id)
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
		if err := w.Chars.AppendMessages(ctx, id, batch, counter, 8192); err != nil {
			return err
		}
		if c, err = w.Chars.Get(ctx, id); err != nil {
			return err
		}
	}
	return w.Chars.UpdateState(ctx, id, map[string]any{"turn": turn})
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// forgeRoom is the look observation of the long runs, obsBytes long.
func forgeRoom(obsBytes int) string {
	room := "You see the forge: an anvil scarred by years of work, a quench tub of black water, tongs and hammers on the wall, " +
		"a rack of half-finished blades, sacks of charcoal, a bellows with a patched leather side, and through the door the muddy square of Oakvale. "
	return strings.Repeat(room, obsBytes/len(room)+1)[:obsBytes]
}
