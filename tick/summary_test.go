package tick

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// The summary is incremental: what the first compaction learned survives
// thirty more, with the builtin summarizer, though every compaction brings
// new names, numbers and chores that compete for the same budget.
func TestSummaryKeepsEarlyFactsThroughThirtyCompactions(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	c := brom()
	c.ContextWindow = 4096
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	tick := func(actor, text string) {
		t.Helper()
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: actor, Text: text}}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.eng.Tick(ctx, "brom"); err != nil {
			t.Fatal(err)
		}
	}
	planted := map[string]string{
		"Alice promised to pay 17 gold for the silver sword by the harvest fair.": "17 gold",
		"My daughter Mira lives in Eastmarch and she will visit you.":             "Eastmarch",
		"I owe you 3 silver for mending my cart, Brom.":                           "3 silver",
	}
	actors := []string{"alice", "bob", "carl"}
	i := 0
	for text := range planted {
		tick(actors[i], text)
		i++
	}
	people := []string{"Dora", "Edric", "Fenna", "Gorm", "Hilde", "Ivo", "Jana", "Kurt"}
	compactions := 0
	for round := 0; compactions < 30; round++ {
		if round > 2000 {
			t.Fatalf("only %d compactions in %d rounds", compactions, round)
		}
		who := people[round%len(people)]
		tick(strings.ToLower(who), fmt.Sprintf("%s here, round %d: the weather at the %d mile stone turned, and %s wants %d nails for the barn.",
			who, round, round%13, people[(round+3)%len(people)], round%40+2))
		if round%4 == 3 {
			rec, err := env.eng.Compact(ctx, "brom", "")
			if err != nil {
				t.Fatal(err)
			}
			if rec != nil {
				compactions++
			}
		}
	}
	live, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if len(live) == 0 || !live[0].Summary {
		t.Fatal("no summary at the head of the live history")
	}
	for text, key := range planted {
		if !strings.Contains(live[0].Content, key) {
			t.Errorf("after %d compactions the summary lost %q (%q):\n%s", compactions, key, text, live[0].Content)
		}
	}
}
