package tick

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/npcd/npcd/character"
)

// An event's time is checked against the world's clock as the engine's
// ticks moved it, and, before the event is refused or the clock taken as
// unset, against the clock read again from the NPCs (at most once a
// second): another daemon may have ticked the world on.
func TestEventTimesAreCheckedAgainstTheClockOthersMoved(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC))
	env := openEnvDeps(t, filepath.Join(t.TempDir(), "npcd.db"), nil, 0, func(d *Deps) { d.Clock = clock })
	ctx := context.Background()
	for _, c := range []*character.Character{brom(), {ID: "mara", Name: "Mara", Persona: "You are Mara, the miller."}} {
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	at := func(days int) time.Time { return time.Date(2300, 1, 1, 9, 0, 0, 0, time.UTC).AddDate(0, 0, days) }
	post := func(days int) error {
		t.Helper()
		_, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: "Morning, Brom.", At: at(days)}})
		return err
	}
	refused := func(days int, against string) {
		t.Helper()
		var unfit *character.UnfitError
		if err := post(days); !errors.As(err, &unfit) || unfit.Field != "events[0].at" || !strings.Contains(unfit.Message, against) {
			t.Fatalf("an event at day %d: %v, want it refused against %s", days, err, against)
		}
	}
	otherDaemon := func(days int) {
		t.Helper()
		if err := env.chars.DB().Exec("UPDATE characters SET game_time = ? WHERE id = ?", at(days), "mara").Error; err != nil {
			t.Fatal(err)
		}
	}
	// No NPC has perceived anything: any date is accepted.
	if err := post(0); err != nil {
		t.Fatal(err)
	}
	// Another daemon ticks mara 300 days on: the clock this engine knows
	// is unset, and read again, it refuses a date a year past day 300.
	otherDaemon(300)
	clock.Advance(2 * time.Second)
	refused(800, "2300-10-28")
	if err := post(400); err != nil {
		t.Fatalf("an event 100 days past the clock another daemon moved: %v, want it accepted", err)
	}
	if res, err := env.eng.Tick(ctx, "brom"); err != nil || res.Idle {
		t.Fatal(res, err)
	}
	// brom's tick moved the clock to day 400: day 700 is within a year.
	if err := post(700); err != nil {
		t.Fatalf("an event 300 days past brom's last tick: %v, want it accepted", err)
	}
	// Within a second of the last read, the clock as known; a second
	// later, the clock another daemon moved.
	otherDaemon(1000)
	refused(1300, "2301-02-05")
	clock.Advance(2 * time.Second)
	if err := post(1300); err != nil {
		t.Fatalf("an event 300 days past the clock another daemon moved, read again: %v, want it accepted", err)
	}
}
