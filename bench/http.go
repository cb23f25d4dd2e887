package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/npcd/npcd/api"
)

// benchHTTP measures ticks through the real daemon on a loopback port, in
// the same process: concurrent clients tick one NPC each, the request
// carrying its event (mode "npc"), or tick the NPCs in batches of batchSize
// with POST /v1/tick, each request carrying its NPCs' events (mode "batch").
// Both count the posting of the events. Latencies are whole requests, the
// model's time included.
func benchHTTP(ctx context.Context, h Harness, b TickOptions, n int, mode string) (*TickMeasure, error) {
	addr, stop, err := h.Serve(ctx, ServeOptions{MaxCalls: b.Workers, IndexCacheMB: b.CacheMB})
	if err != nil {
		return nil, err
	}
	defer stop()
	hc := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: b.Workers}}
	client := api.NewClient("http://"+addr, "", hc)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("npc-%d", i)
		p := benchNPC(ids[i])
		if _, _, err := client.PutNPC(ctx, ids[i], api.NPCSettings{Name: p.Name, Persona: p.Persona}); err != nil {
			return nil, err
		}
	}
	rounds := max(1, b.Ticks/n)
	var lat []time.Duration
	var mu sync.Mutex
	var elapsed time.Duration
	cpu0 := cpuTime()
	event := func(id string, r int) []api.Event {
		return []api.Event{{Kind: "say", Actor: "alice", Text: fmt.Sprintf("Round %d: have you seen my sword, %s?", r, id)}}
	}
	const batchSize = 100
	for r := 0; r < rounds; r++ {
		var units [][]string // what one request ticks
		if mode == "batch" {
			for i := 0; i < len(ids); i += batchSize {
				units = append(units, ids[i:min(i+batchSize, len(ids))])
			}
		} else {
			for _, id := range ids {
				units = append(units, []string{id})
			}
		}
		work := make(chan []string)
		errc := make(chan error, 1)
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < min(b.Workers, len(units)); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for u := range work {
					t0 := time.Now()
					var err error
					if mode == "batch" {
						req := api.BatchTickRequest{NPCs: u, Events: make(map[string][]api.Event, len(u))}
						for _, id := range u {
							req.Events[id] = event(id, r)
						}
						var res *api.BatchTickResponse
						if res, err = client.TickBatch(ctx, req); err == nil {
							err = batchFailure(res, u)
						}
					} else {
						var posted api.EventsAccepted
						if _, posted, err = client.TickWithEvents(ctx, u[0], "", event(u[0], r)); err == nil && posted.Accepted != 1 {
							err = fmt.Errorf("tick of %s: its event not stored: %+v", u[0], posted)
						}
					}
					d := time.Since(t0)
					mu.Lock()
					for range u {
						lat = append(lat, d)
					}
					mu.Unlock()
					if err != nil {
						select {
						case errc <- err:
						default:
						}
					}
				}
			}()
		}
		for _, u := range units {
			work <- u
		}
		close(work)
		wg.Wait()
		elapsed += time.Since(start)
		select {
		case err := <-errc:
			return nil, err
		default:
		}
	}
	cpu := cpuTime() - cpu0
	slices.Sort(lat)
	pct := func(p float64) float64 { return msOf(percentile(lat, p)) }
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return &TickMeasure{
		NPCs: n, Ticks: len(lat), Mode: "http-" + mode, TicksPerS: float64(len(lat)) / elapsed.Seconds(),
		P50MS: pct(0.50), P95MS: pct(0.95), P99MS: pct(0.99),
		CPUMSPerTick: msOf(cpu) / float64(len(lat)),
		PeakRSSMiB:   float64(ru.Maxrss) / 1024,
	}, nil
}

// batchFailure is the first failure a batch tick of ids answered: an NPC
// that did not tick, events refused, or events not stored.
func batchFailure(res *api.BatchTickResponse, ids []string) error {
	if len(res.Errors) > 0 {
		return fmt.Errorf("batch tick: %s: %s", res.Errors[0].NPC, res.Errors[0].Error)
	}
	for _, id := range ids {
		if ev := res.Events[id]; ev.Error != "" || ev.Accepted != 1 {
			return fmt.Errorf("batch tick: the event for %s: %+v", id, ev)
		}
	}
	return nil
}
