package api

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkSayToFeed measures what a game waits from posting a say to
// reading the NPC's answer off the action feed, over loopback HTTP with the
// builtin model: post the event, tick, and a reader already long-polling the
// feed receives the tick.
func BenchmarkSayToFeed(b *testing.B) {
	e := newEnv(b, envOpts{})
	ctx := context.Background()
	if _, _, err := e.client.PutNPC(ctx, "brom", bromSettings()); err != nil {
		b.Fatal(err)
	}
	delivered := make(chan int64, 1)
	rctx, stop := context.WithCancel(ctx)
	defer stop() // before the server closes, which waits for the poll
	go func() {
		var cursor int64
		for {
			f, err := e.client.Actions(rctx, cursor, 0, 5*time.Second, "brom")
			if err != nil {
				return
			}
			for _, t := range f.Ticks {
				delivered <- t.Tick
			}
			cursor = f.Cursor
		}
	}()
	b.ResetTimer()
	for i := range b.N {
		if _, err := e.client.PostEvents(ctx, "brom", []Event{{ID: fmt.Sprint(i), Kind: "say", Actor: "alice", Text: "What do you sell?"}}); err != nil {
			b.Fatal(err)
		}
		if _, err := e.client.Tick(ctx, "brom"); err != nil {
			b.Fatal(err)
		}
		if got := <-delivered; got != int64(i+1) {
			b.Fatalf("feed delivered tick %d, want %d", got, i+1)
		}
	}
}
