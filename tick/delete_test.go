package tick

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
)

// rowsOf counts the rows NPC id owns in every table that holds NPC rows.
func rowsOf(t *testing.T, db *gorm.DB, id string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range []string{"characters", "messages", "events", "profiles", "facts", "tick_records",
		"entries", "memories", "memory_revs", "compactions"} {
		col := "character_id"
		if table == "characters" {
			col = "id"
		}
		var n int64
		if err := db.Table(table).Where(col+" = ?", id).Count(&n).Error; err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

// gatedModel answers like the builtin model, but holds the first request
// of a task until the test lets it go, so a test can act in the middle of
// a sleep.
type gatedModel struct {
	llm.Chatter
	task    llm.Task
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gatedModel) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if req.Task == g.task {
		first := false
		g.once.Do(func() { first = true })
		if first {
			close(g.arrived)
			<-g.release
		}
	}
	return g.Chatter.Chat(ctx, req)
}

func TestSleepOverlappingADeleteLeavesNothingBehind(t *testing.T) {
	g := &gatedModel{Chatter: llm.NewBuiltin(), task: llm.TaskExtract, arrived: make(chan struct{}), release: make(chan struct{})}
	env := openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), g)
	ctx := context.Background()
	c := brom()
	c.Model = "remote-model"
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		say(t, env, "alice", fmt.Sprintf("I live in Oakvale and my brother %d owes me %d gold!", i, 10+i))
	}
	done := make(chan error, 1)
	go func() {
		_, err := env.eng.Sleep(ctx, "brom")
		done <- err
	}()
	<-g.arrived // the consolidation read the journal and waits for the model
	if err := env.eng.DeleteNPC(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	if err := <-done; !errors.Is(err, character.ErrNotFound) {
		t.Fatalf("the sleep of a deleted NPC ended with %v, want not found", err)
	}
	if left := rowsOf(t, env.eng.deps.DB, "brom"); len(left) > 0 {
		t.Fatalf("rows left after the delete: %v", left)
	}
}

func TestEventsPostedDuringADeleteAreRefused(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	// The delete lands right after the post has checked that the NPC
	// exists and before it stores the events.
	var armed atomic.Bool
	armed.Store(true)
	db := env.eng.deps.DB
	env.eng.afterIntake = func() {
		if armed.CompareAndSwap(true, false) {
			if err := env.eng.DeleteNPC(context.Background(), "brom"); err != nil {
				t.Errorf("delete: %v", err)
			}
		}
	}
	_, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{ID: "evt-1", Kind: "say", Actor: "alice", Text: "Hello, Brom."}})
	if armed.Load() {
		t.Fatal("the delete never ran")
	}
	if !errors.Is(err, character.ErrNotFound) {
		t.Fatalf("post during the delete: %v, want not found", err)
	}
	if left := rowsOf(t, db, "brom"); len(left) > 0 {
		t.Fatalf("rows left after the delete: %v", left)
	}
	// A new NPC of the same id starts empty: the old event id is new to it.
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	acc, dup, err := env.eng.PostEvents(ctx, "brom", []EventInput{{ID: "evt-1", Kind: "say", Actor: "bob", Text: "Good morning."}})
	if err != nil || acc != 1 || dup != 0 {
		t.Fatalf("re-created NPC: accepted %d duplicates %d err %v, want the old id accepted", acc, dup, err)
	}
	if n, err := env.chars.PendingCount(ctx, "brom"); err != nil || n != 1 {
		t.Fatalf("re-created NPC has %d pending events (%v), want only its own 1", n, err)
	}
}

// TestConcurrentWritersDuringDeletesLeaveNoOrphans deletes and re-creates
// an NPC while events are posted, ticks run and sleeps consolidate; after
// the last delete nothing of it is left.
func TestConcurrentWritersDuringDeletesLeaveNoOrphans(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	worker := func(fn func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				fn(i)
			}
		}()
	}
	var posted atomic.Int64
	for w := 0; w < 2; w++ {
		worker(func(i int) {
			// Posting can outrun the ticks (on PostgreSQL it does): the
			// inbox is kept below its limit, so the test's own events fit.
			if n, err := env.chars.PendingCount(ctx, "brom"); err == nil && n > 500 {
				return
			}
			acc, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{ID: fmt.Sprintf("w%d-%d", w, i), Kind: "say", Actor: "alice",
				Text: fmt.Sprintf("My cousin %d owes me %d gold, Brom!", i, i)}})
			if err == nil {
				posted.Add(int64(acc))
			}
		})
	}
	worker(func(int) { env.eng.Tick(ctx, "brom") })
	worker(func(int) { env.eng.Sleep(ctx, "brom") })
	for round := 0; round < 15; round++ {
		say(t, env, "alice", "I will pay you forty silver for the ruby hilt.")
		say(t, env, "bob", fmt.Sprintf("Round %d: the mill burned down last night.", round))
		if err := env.eng.DeleteNPC(ctx, "brom"); err != nil {
			t.Fatal(err)
		}
		if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.eng.DeleteNPC(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if left := rowsOf(t, env.eng.deps.DB, "brom"); len(left) > 0 {
		t.Fatalf("rows left after the last delete: %v", left)
	}
}

func TestEventsFarAheadOfTheGamesClockAreRefused(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	// The game's calendar is its own: before any NPC perceived anything,
	// any date sets it.
	start := time.Date(2300, 3, 2, 9, 0, 0, 0, time.UTC)
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: "Morning, Brom.", At: start}}); err != nil {
		t.Fatalf("the first event of a game set in 2300: %v", err)
	}
	if _, err := env.eng.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	far := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	_, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{
		{Kind: "say", Actor: "alice", Text: "Still here?", At: start.Add(time.Hour)},
		{Kind: "say", Actor: "bob", Text: "The end of days.", At: far},
	})
	var ue *character.UnfitError
	if !errors.As(err, &ue) || ue.Field != "events[1].at" || !strings.Contains(ue.Message, "366 days") {
		t.Fatalf("an event at %v: %v, want events[1].at refused", far, err)
	}
	if n, _ := env.chars.PendingCount(ctx, "brom"); n != 0 {
		t.Fatalf("a refused post stored %d events", n)
	}
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "bob", Text: "Next year.", At: start.Add(367 * 24 * time.Hour)}}); !errors.As(err, &ue) {
		t.Fatalf("an event 367 days ahead: %v, want refused", err)
	}
	// A season's skip is fine, and the NPC's clock follows.
	skip := start.Add(200 * 24 * time.Hour)
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: "Spring again.", At: skip}}); err != nil {
		t.Fatalf("an event 200 days ahead: %v", err)
	}
	if _, err := env.eng.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	if c, err := env.chars.Get(ctx, "brom"); err != nil || !c.State.GameTime.Equal(skip) {
		t.Fatalf("game time %v (%v), want %v", c.State.GameTime, err, skip)
	}
	// The window runs from the game's clock, not from each NPC's: a new NPC
	// (or one left alone for long) perceives the present.
	cora := &character.Character{ID: "cora", Name: "Cora", Persona: "You are Cora, the miller."}
	if _, err := env.eng.PutNPC(ctx, cora); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.eng.PostEvents(ctx, "cora", []EventInput{{Kind: "say", Actor: "alice", Text: "Flour, please.", At: skip.Add(300 * 24 * time.Hour)}}); err != nil {
		t.Fatalf("a new NPC's event near the game's clock: %v", err)
	}
}
