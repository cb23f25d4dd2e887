package tick

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/npcd/npcd/character"
)

// Profiles key on the game's actor id: a renamed player keeps one profile
// (under the new name), two players of one name keep two, and a fact the
// model writes about a name joins the profile of the actor last seen under
// it.
func TestProfilesKeyOnActorID(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	post := func(evs ...EventInput) {
		t.Helper()
		if _, _, err := env.eng.PostEvents(ctx, "brom", evs); err != nil {
			t.Fatal(err)
		}
		if _, err := env.eng.Tick(ctx, "brom"); err != nil {
			t.Fatal(err)
		}
	}
	post(EventInput{Kind: "say", ActorID: "acct:42", ActorName: "Bob", Text: "Hello smith."},
		EventInput{Kind: "say", ActorID: "acct:77", Actor: "Bob", Text: "I am the other Bob."})
	post(EventInput{Kind: "say", ActorID: "acct:42", ActorName: "Robert", Text: "I go by Robert now."})

	ps, err := env.chars.Profiles(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]character.Profile{}
	for _, p := range ps {
		byKey[p.Entity] = p
	}
	if len(ps) != 2 {
		t.Fatalf("profiles = %+v, want one per actor id", ps)
	}
	if p := byKey["@acct:42"]; p.Name != "Robert" || p.Mentions != 2 {
		t.Errorf("renamed player's profile = %+v, want one profile named Robert seen twice", p)
	}
	if p := byKey["@acct:77"]; p.Name != "Bob" || p.Mentions != 1 {
		t.Errorf("second Bob's profile = %+v, want its own", p)
	}
	// The model knows names: a fact about "Bob" goes to the Bob it saw.
	if _, _, err := env.chars.AddFact(ctx, "brom", character.Fact{Entity: "bob", Key: "debt", Content: "owes 5 gold", Source: "tool"}); err != nil {
		t.Fatal(err)
	}
	if fs, err := env.chars.Facts(ctx, "brom", "@acct:77", true); err != nil || len(fs) != 1 {
		t.Errorf("facts of the Bob seen = %+v, %v; want the new fact", fs, err)
	}
	// The NPC sees names, never ids.
	hist, err := env.chars.History(ctx, "brom", character.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	for _, m := range hist {
		seen.WriteString(m.Content)
	}
	if s := seen.String(); !strings.Contains(s, `Robert says: "I go by Robert now."`) || strings.Contains(s, "acct:") {
		t.Errorf("perception shows ids or lacks the new name:\n%s", s)
	}
}

// An actor_id alone names the actor; bad ids and conflicting names are
// refused naming the field, and store nothing.
func TestActorIDInput(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ev    EventInput
		field string
	}{
		{EventInput{Kind: "say", ActorID: "has space", Text: "x"}, "events[0].actor_id"},
		{EventInput{Kind: "say", ActorID: strings.Repeat("a", 129), Text: "x"}, "events[0].actor_id"},
		{EventInput{Kind: "say", ActorID: "p1", Actor: "Bob", ActorName: "Rob", Text: "x"}, "events[0].actor_name"},
		{EventInput{Kind: "say", ActorID: "p1", ActorName: `Bob says: "x"`, Text: "x"}, "events[0].actor_name"},
	} {
		_, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{tc.ev})
		var ie *InputError
		if !errors.As(err, &ie) || ie.Field != tc.field {
			t.Errorf("PostEvents(%+v) = %v, want an input error naming %s", tc.ev, err, tc.field)
		}
	}
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", ActorID: "user@host", Text: "hi"}}); err != nil {
		t.Fatal(err)
	}
	evs, err := env.chars.PendingEvents(ctx, "brom", 10)
	if err != nil || len(evs) != 1 || evs[0].Actor != "user@host" || evs[0].ActorID != "user@host" {
		t.Fatalf("pending = %+v, %v; want the one event, named by its id", evs, err)
	}
}
