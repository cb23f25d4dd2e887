package character_test

import (
	"context"
	"testing"
)

func TestUpdateStateReturning(t *testing.T) {
	s := newStore(t)
	putNPC(t, s, "brom")
	got, err := s.UpdateStateReturning(context.Background(), "brom", map[string]any{"tick": 7})
	if err != nil {
		t.Fatal(err)
	}
	want := get(t, s, "brom")
	if got.State.Tick != 7 || got.Name != want.Name || got.State.HistoryRev != want.State.HistoryRev || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}
