package journal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/store"
)

// The hot reads of a search read the times of rows written in the other
// layouts SQLite's driver reads (older rows) as those written now: the
// same results, scored the same, at the same game times.
func TestSearchReadsOlderTimeLayouts(t *testing.T) {
	e := newEnv(t)
	if !store.IsSQLite(e.db) {
		t.Skip("the layouts are SQLite's")
	}
	ctx := context.Background()
	at := t0.Add(1234567891 * time.Nanosecond)
	e.npc(t, "brom", at.Add(3*time.Hour))
	e.say(t, "brom", at, []string{"Alice says: the dragon sleeps under the mill.", "Bob says: the harbor smells of tar."}, nil)
	e.say(t, "brom", at.Add(time.Hour), []string{"Alice says: the mill wheel is broken again."}, nil)
	if err := e.jour.Add(ctx, "brom", &Entry{Type: TypeConversation, Content: "Alice: a dragon sleeps under the mill!", Importance: 8,
		GameTime: at.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.jour.AddMemory(ctx, "brom", &Memory{Content: "Tar barrels come to the harbor from the south", GameTime: at.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	queries := []string{"dragon under the mill", "tar harbor", "mill wheel"}
	search := func(t *testing.T) [][]Result {
		var out [][]Result
		for _, kept := range []bool{true, false} {
			r := e.retriever(t)
			if !kept {
				r.cfg.keepBytes = 0 // every result's row is read
			}
			for _, q := range queries {
				rs, err := r.Search(ctx, "brom", q, 5)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, rs)
			}
		}
		return out
	}
	want := search(t)
	for i, rs := range want {
		if len(rs) == 0 {
			t.Fatalf("search %d found nothing", i)
		}
	}
	columns := map[string]string{"characters": "game_time", "messages": "game_time", "entries": "game_time", "memories": "game_time"}
	rewrite := func(t *testing.T, from, to string) {
		for table, col := range columns {
			q := fmt.Sprintf("UPDATE %s SET %s = replace(%s, ?, ?)", table, col, col)
			if err := e.db.Exec(q, from, to).Error; err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, layout := range []struct{ name, from, to string }{
		{"time.Time.String", "+00:00", " +0000 UTC"},
		{"T", " ", "T"},
		{"Z", "+00:00", "Z"},
		{"no zone", "+00:00", ""},
	} {
		t.Run(layout.name, func(t *testing.T) {
			rewrite(t, layout.from, layout.to)
			if diff := cmp.Diff(want, search(t)); diff != "" {
				t.Errorf("results (-written layout +%s):\n%s", layout.name, diff)
			}
			if layout.to != "" {
				rewrite(t, layout.to, layout.from) // back to the layout written
			}
		})
	}
}
