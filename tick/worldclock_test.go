package tick

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/npcd/npcd/character"
)

// An event's time is checked against the world's clock as the engine's
// ticks moved it, and, before the event is refused, against the clock
// read again from the NPCs: another daemon may have ticked the world on.
func TestEventTimesAreCheckedAgainstTheClockOthersMoved(t *testing.T) {
	env := newEnv(t)
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
	if err := post(0); err != nil {
		t.Fatal(err)
	}
	if res, err := env.eng.Tick(ctx, "brom"); err != nil || res.Idle {
		t.Fatal(res, err)
	}
	// Another daemon ticks mara 300 days on: 400 days from brom's tick is
	// then within a year of the world's clock, which this engine learns
	// from the NPCs' rows before it refuses the event.
	if err := env.chars.DB().Exec("UPDATE characters SET game_time = ? WHERE id = ?", at(300), "mara").Error; err != nil {
		t.Fatal(err)
	}
	if err := post(400); err != nil {
		t.Fatalf("an event 100 days past the clock another daemon moved: %v, want it accepted", err)
	}
	// A year and more past that: refused, naming the clock.
	var unfit *character.UnfitError
	if err := post(800); !errors.As(err, &unfit) || unfit.Field != "events[0].at" || !strings.Contains(unfit.Message, "2300-10-28") {
		t.Fatalf("an event 500 days past the world's clock: %v, want it refused against 2300-10-28", err)
	}
	if res, err := env.eng.Tick(ctx, "brom"); err != nil || res.Idle {
		t.Fatal(res, err)
	}
	// brom's tick moved the clock to day 400: day 700 is within a year.
	if err := post(700); err != nil {
		t.Fatalf("an event 300 days past brom's last tick: %v, want it accepted", err)
	}
}
