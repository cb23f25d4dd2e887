package journal

import (
	"context"
	"fmt"
	"testing"
)

// The index cache reports its size and keeps within its budget: the least
// recently searched NPCs are dropped first, the one being searched is kept.
func TestIndexCacheStaysWithinItsBudget(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var texts []string
	for i := 0; i < 60; i++ {
		texts = append(texts, fmt.Sprintf("Alice owes Brom %d gold for the sword number %d she lost at the forge.", i, i))
	}
	ids := []string{"a", "b", "c", "d", "e", "f"}
	for _, id := range ids {
		e.npc(t, id, t0)
		e.say(t, id, t0, texts, nil)
	}
	// One NPC's index, measured with a budget large enough for all.
	big := e.retriever(t)
	if st := big.CacheStats(); st.Entries != 0 || st.Bytes != 0 || st.Limit != DefaultCacheBytes {
		t.Fatalf("an unused cache: %+v", st)
	}
	for _, id := range ids {
		if _, err := big.Search(ctx, id, "sword", 3); err != nil {
			t.Fatal(err)
		}
	}
	all := big.CacheStats()
	if all.Entries != len(ids) || all.Bytes <= 0 {
		t.Fatalf("after searching %d NPCs: %+v", len(ids), all)
	}
	one := all.Bytes / int64(len(ids))
	// A budget of about two indexes holds two, whatever the number searched.
	r := e.retriever(t, WithCacheBytes(2*one+one/2))
	for _, id := range ids {
		if _, err := r.Search(ctx, id, "sword", 3); err != nil {
			t.Fatal(err)
		}
		if st := r.CacheStats(); st.Bytes > st.Limit || st.Entries > 2 {
			t.Fatalf("after searching %s: %+v, over the budget", id, st)
		}
	}
	if st := r.CacheStats(); st.Entries != 2 {
		t.Fatalf("the cache holds %d indexes, want the last 2 searched: %+v", st.Entries, st)
	}
}
