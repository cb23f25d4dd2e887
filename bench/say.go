package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/npcd/npcd/api"
)

// SayOptions is what `npcd bench say` measures.
type SayOptions struct {
	NPCs     int
	Says     int
	Clients  int
	Debounce time.Duration
	MaxWait  time.Duration
}

// SayMeasure is the result, as --json prints it.
type SayMeasure struct {
	NPCs       int     `json:"npcs"`
	Says       int     `json:"says"`
	Clients    int     `json:"clients"`
	DebounceMS float64 `json:"debounce_ms"`
	MaxWaitMS  float64 `json:"max_wait_ms"`
	P50MS      float64 `json:"p50_ms"`
	P95MS      float64 `json:"p95_ms"`
	P99MS      float64 `json:"p99_ms"`
	MaxMS      float64 `json:"max_ms"`
	SaysPerS   float64 `json:"says_per_s"`
	// CPUMSPerSay is the process's CPU time per say, daemon and clients
	// together: what the latencies cost, whatever the machine's load.
	CPUMSPerSay float64 `json:"cpu_ms_per_say"`
}

// Check refuses options the measurement cannot run with, naming the flag.
func (b SayOptions) Check() error {
	switch {
	case b.NPCs < 1:
		return fmt.Errorf("--npcs must be at least 1")
	case b.Says < 1:
		return fmt.Errorf("--says must be at least 1")
	case b.Clients < 1 || b.Clients > b.NPCs:
		return fmt.Errorf("--clients must be between 1 and --npcs (one say in flight per NPC)")
	case b.Debounce < time.Millisecond || b.Debounce > time.Minute:
		return fmt.Errorf("--debounce must be between 1ms and 1m")
	case b.MaxWait < b.Debounce || b.MaxWait > 10*time.Minute:
		return fmt.Errorf("--max-wait must be between --debounce and 10m")
	}
	return nil
}

// Say runs the daemon on a loopback port (builtin model, temporary
// database), registers NPCs with auto-tick, opens GET /v1/actions/stream
// and has concurrent clients post a say event to one NPC at a time; each
// latency runs from the event's POST to the NPC's tick arriving on the
// stream, the debounce included.
func Say(ctx context.Context, h Harness, b SayOptions) (*SayMeasure, error) {
	if err := b.Check(); err != nil {
		return nil, err
	}
	addr, stop, err := h.Serve(ctx, ServeOptions{})
	if err != nil {
		return nil, err
	}
	defer stop()
	base := "http://" + addr
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: b.Clients + 1}}
	client := api.NewClient(base, "", hc)
	ids := make([]string, b.NPCs)
	arrived := make(map[string]chan time.Time, b.NPCs)
	for i := range ids {
		ids[i] = fmt.Sprintf("npc-%d", i)
		arrived[ids[i]] = make(chan time.Time, 1)
		p := benchNPC(ids[i])
		s := api.NPCSettings{Name: p.Name, Persona: p.Persona, Scope: "bench",
			AutoTick: &api.AutoTickSettings{Enabled: true, DebounceMS: int(b.Debounce / time.Millisecond), MaxWaitMS: int(b.MaxWait / time.Millisecond)}}
		if _, _, err := client.PutNPC(ctx, ids[i], s); err != nil {
			return nil, err
		}
	}

	// One stream for the whole game, as a game server would hold it.
	streamCtx, closeStream := context.WithCancel(ctx)
	defer closeStream()
	req, err := http.NewRequestWithContext(streamCtx, "GET", base+"/v1/actions/stream?scope=bench", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("action stream: %s", resp.Status)
	}
	streamErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			at := time.Now()
			var ft api.FeedTick
			if err := json.Unmarshal([]byte(data), &ft); err != nil {
				streamErr <- fmt.Errorf("action stream: %w", err)
				return
			}
			if ch, ok := arrived[ft.NPC]; ok {
				select {
				case ch <- at:
				default:
				}
			}
		}
		streamErr <- fmt.Errorf("action stream ended: %v", sc.Err())
	}()

	// Each client owns NPCs of its own, so one say per NPC is in flight
	// and the action that arrives is its answer.
	lat := make([]time.Duration, 0, b.Says)
	var mu sync.Mutex
	errc := make(chan error, b.Clients)
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), cpuTime()
	for c := 0; c < b.Clients; c++ {
		var mine []string
		for i := c; i < len(ids); i += b.Clients {
			mine = append(mine, ids[i])
		}
		n := b.Says / b.Clients
		if c < b.Says%b.Clients {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < n; k++ {
				id := mine[k%len(mine)]
				ev := []api.Event{{Kind: "say", ActorID: "player-1", ActorName: "Alice", Text: fmt.Sprintf("Say %d: have you seen my sword?", k)}}
				t0 := time.Now()
				if _, err := client.PostEvents(ctx, id, ev); err != nil {
					errc <- err
					return
				}
				select {
				case at := <-arrived[id]:
					mu.Lock()
					lat = append(lat, at.Sub(t0))
					mu.Unlock()
				case err := <-streamErr:
					errc <- err
					return
				case <-time.After(30 * time.Second):
					errc <- fmt.Errorf("no action of %s within 30s of its say", id)
					return
				case <-ctx.Done():
					errc <- ctx.Err()
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return &SayMeasure{NPCs: b.NPCs, Says: len(lat), Clients: b.Clients, DebounceMS: ms(b.Debounce), MaxWaitMS: ms(b.MaxWait),
		P50MS: ms(quantile(lat, 0.50)), P95MS: ms(quantile(lat, 0.95)), P99MS: ms(quantile(lat, 0.99)), MaxMS: ms(lat[len(lat)-1]),
		SaysPerS: float64(len(lat)) / elapsed.Seconds(), CPUMSPerSay: ms(cpu) / float64(len(lat))}, nil
}

// quantile is the q-quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
