package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npcd/npcd/tick"
)

// keyedTick ticks npc under key; a transport error (the daemon killed) is
// returned as is.
func (d *daemon) keyedTick(ctx context.Context, npc, key string) (*tick.Result, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+d.addr+"/v1/npcs/"+npc+"/tick", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("tick %s: %d %s", npc, resp.StatusCode, b)
	}
	var r tick.Result
	return &r, json.Unmarshal(b, &r)
}

// TestFeedLosesNothingAcrossKills drives npcd as a game does (events, ticks
// under idempotency keys, a reader following the action feed and storing its
// cursor) and SIGKILLs npcd at random moments. After each restart the game
// retries its unanswered ticks with the same keys and the reader resumes from
// its stored cursor. In the end every tick npcd committed was delivered by
// the feed, each NPC's in order with no gap, and every answer the game got
// is the one the feed delivered.
func TestFeedLosesNothingAcrossKills(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)
	bin := buildDaemon(t)
	db := filepath.Join(t.TempDir(), "npcd.db")
	d := startBinary(t, bin, db)
	npcs := []string{"brom", "mira", "olaf", "hilda"}
	for _, id := range npcs {
		d.put(t, id)
	}

	var (
		mu       sync.Mutex
		answered = map[string]*tick.Result{} // npc/tick → what the game got
		pending  = map[string]string{}       // npc → key of a tick not answered yet
		seen     = map[string][]int64{}      // npc → ticks in feed order
		fed      = map[string]*tick.FeedTick{}
		cursor   int64 // the reader's stored cursor
		events   int
	)
	record := func(r *tick.Result) {
		if !r.Idle {
			answered[fmt.Sprintf("%s/%d", r.NPC, r.Tick)] = r
		}
	}
	// read handles one feed page from the stored cursor; false when the
	// daemon is gone.
	read := func(ctx context.Context, d *daemon, wait string) (int, bool) {
		var f tick.Feed
		code, err := d.do(ctx, "GET", fmt.Sprintf("/v1/actions?after=%d&wait=%s&limit=7", cursor, wait), "", &f)
		if err != nil || code != http.StatusOK {
			return 0, false
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range f.Ticks {
			ft := f.Ticks[i]
			k := fmt.Sprintf("%s/%d", ft.NPC, ft.Tick)
			if fed[k] == nil { // a duplicate after a restart is allowed, not counted twice
				seen[ft.NPC] = append(seen[ft.NPC], ft.Tick)
				fed[k] = &ft
			}
		}
		cursor = f.Cursor // stored only once the page is handled
		return len(f.Ticks), true
	}

	const rounds = 4
	for round := range rounds {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, id := range npcs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					mu.Lock()
					key, retry := pending[id]
					if !retry {
						events++
						key = fmt.Sprintf("%s-r%d-%d", id, round, i)
						pending[id] = key
					}
					mu.Unlock()
					if !retry {
						body := fmt.Sprintf(`{"events": [{"id": %q, "kind": "say", "actor": "alice", "text": "Tell me about iron, %d."}]}`, key, i)
						if code, err := d.do(ctx, "POST", "/v1/npcs/"+id+"/events", body, nil); err != nil || code != http.StatusAccepted {
							return
						}
					}
					r, err := d.keyedTick(ctx, id, key)
					if err != nil {
						return // killed: the key stays pending for the next life
					}
					mu.Lock()
					record(r)
					delete(pending, id)
					mu.Unlock()
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, ok := read(ctx, d, "200ms"); !ok {
					return
				}
			}
		}()
		time.Sleep(time.Duration(150+rng.IntN(400)) * time.Millisecond)
		d.kill(t)
		cancel()
		wg.Wait()
		d = startBinary(t, bin, db)
		// The game retries what it never got an answer to, with the same keys.
		mu.Lock()
		retries := make(map[string]string, len(pending))
		for id, key := range pending {
			retries[id] = key
		}
		mu.Unlock()
		for id, key := range retries {
			r, err := d.keyedTick(context.Background(), id, key)
			if err != nil {
				t.Fatalf("retry of %s under %s after a restart: %v\n%s", id, key, err, d.logTail())
			}
			mu.Lock()
			record(r)
			delete(pending, id)
			mu.Unlock()
		}
	}
	// Drain the feed from the stored cursor.
	for {
		n, ok := read(context.Background(), d, "0s")
		if !ok {
			t.Fatalf("feed read failed\n%s", d.logTail())
		}
		if n == 0 {
			break
		}
	}
	d.stop(t)

	// A long poll waiting when the daemon is asked to stop answers at once:
	// with a shutdown timeout far below the poll's wait, a poll that held on
	// would make the shutdown fail.
	d = startBinary(t, bin, db, "NPCD_SHUTDOWN_TIMEOUT=2s")
	polled := make(chan error, 1)
	go func() {
		var f tick.Feed
		code, err := d.do(context.Background(), "GET", fmt.Sprintf("/v1/actions?after=%d&wait=30s", cursor), "", &f)
		if err == nil && (code != http.StatusOK || len(f.Ticks) != 0) {
			err = fmt.Errorf("answered %d with %d ticks", code, len(f.Ticks))
		}
		polled <- err
	}()
	time.Sleep(300 * time.Millisecond) // let the poll wait (were it not yet, it would be refused or answered at once)
	d.stop(t)
	if err := <-polled; err != nil {
		t.Errorf("long poll during shutdown: %v", err)
	}

	total := 0
	for _, id := range npcs {
		ticks := seen[id]
		for i, n := range ticks {
			if n != int64(i+1) {
				t.Fatalf("%s's ticks in the feed: %v, want 1, 2, 3, ... in order with no gap", id, ticks)
			}
		}
		total += len(ticks)
	}
	for k, r := range answered {
		f := fed[k]
		if f == nil {
			t.Errorf("tick %s answered to the game but never in the feed", k)
			continue
		}
		a, _ := json.Marshal(r.Actions)
		b, _ := json.Marshal(f.Actions)
		if string(a) != string(b) {
			t.Errorf("tick %s: the game got %s, the feed says %s", k, a, b)
		}
	}
	if total == 0 || len(answered) == 0 {
		t.Fatalf("nothing ticked (%d in the feed, %d answered): the test drove nothing", total, len(answered))
	}
	var per []string
	for _, id := range npcs {
		per = append(per, fmt.Sprintf("%s %d", id, len(seen[id])))
	}
	t.Logf("%d rounds with a SIGKILL each: %d events, %d ticks in the feed (%s), %d answers received, all delivered",
		rounds, events, total, strings.Join(per, ", "), len(answered))
}
