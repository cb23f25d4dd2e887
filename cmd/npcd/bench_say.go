package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/npcd/npcd/api"
)

// sayBench is what `npcd bench say` measures.
type sayBench struct {
	npcs     int
	says     int
	clients  int
	debounce time.Duration
	maxWait  time.Duration
	json     bool
}

// sayMeasure is the result, as --json prints it.
type sayMeasure struct {
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

func benchSayCommand(stdout io.Writer) *cobra.Command {
	var b sayBench
	cmd := &cobra.Command{
		Use:   "say",
		Short: "Latency from a say event to the NPC's action on the action stream, with auto-tick",
		Long: `Runs the real daemon on a loopback port (builtin model, temporary database), registers NPCs
with auto-tick, opens GET /v1/actions/stream and has concurrent clients post a say event to one
NPC at a time; each latency runs from the event's POST to the NPC's tick arriving on the stream
(the debounce included). Reports p50/p95/p99 in milliseconds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case b.npcs < 1:
				return fmt.Errorf("--npcs must be at least 1")
			case b.says < 1:
				return fmt.Errorf("--says must be at least 1")
			case b.clients < 1 || b.clients > b.npcs:
				return fmt.Errorf("--clients must be between 1 and --npcs (one say in flight per NPC)")
			case b.debounce < time.Millisecond || b.debounce > time.Minute:
				return fmt.Errorf("--debounce must be between 1ms and 1m")
			case b.maxWait < b.debounce || b.maxWait > 10*time.Minute:
				return fmt.Errorf("--max-wait must be between --debounce and 10m")
			}
			m, err := benchSay(cmd.Context(), b)
			if err != nil {
				return err
			}
			if b.json {
				return json.NewEncoder(stdout).Encode(m)
			}
			_, err = fmt.Fprintf(stdout, "say → action on the stream: %d NPCs, %d says, %d clients, debounce %s: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms (%.0f says/s, %.2f ms CPU a say)\n",
				m.NPCs, m.Says, m.Clients, b.debounce, m.P50MS, m.P95MS, m.P99MS, m.MaxMS, m.SaysPerS, m.CPUMSPerSay)
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&b.npcs, "npcs", 200, "NPCs, each with auto-tick")
	f.IntVar(&b.says, "says", 2000, "say events to measure")
	f.IntVar(&b.clients, "clients", 20, "clients posting at once (each waits for its NPC's action before the next say)")
	f.DurationVar(&b.debounce, "debounce", 10*time.Millisecond, "the NPCs' auto_tick.debounce_ms")
	f.DurationVar(&b.maxWait, "max-wait", 100*time.Millisecond, "the NPCs' auto_tick.max_wait_ms")
	f.BoolVar(&b.json, "json", false, "print one JSON object")
	return cmd
}

// benchSay runs the measurement.
func benchSay(ctx context.Context, b sayBench) (*sayMeasure, error) {
	dir, err := os.MkdirTemp("", "npcd-bench-say-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg := defaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DB = filepath.Join(dir, "bench.db")
	cfg.LogLevel = "error"
	sctx, stop := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(sctx, cfg, io.Discard, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		stop()
		return nil, fmt.Errorf("serve: %w", err)
	}
	defer func() {
		stop()
		<-done
	}()
	base := "http://" + addr
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: b.clients + 1}}
	client := api.NewClient(base, "", hc)
	ids := make([]string, b.npcs)
	arrived := make(map[string]chan time.Time, b.npcs)
	for i := range ids {
		ids[i] = fmt.Sprintf("npc-%d", i)
		arrived[ids[i]] = make(chan time.Time, 1)
		p := benchNPC(ids[i])
		s := api.NPCSettings{Name: p.Name, Persona: p.Persona, Scope: "bench",
			AutoTick: &api.AutoTickSettings{Enabled: true, DebounceMS: int(b.debounce / time.Millisecond), MaxWaitMS: int(b.maxWait / time.Millisecond)}}
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
	lat := make([]time.Duration, 0, b.says)
	var mu sync.Mutex
	errc := make(chan error, b.clients)
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), cpuTime()
	for c := 0; c < b.clients; c++ {
		var mine []string
		for i := c; i < len(ids); i += b.clients {
			mine = append(mine, ids[i])
		}
		n := b.says / b.clients
		if c < b.says%b.clients {
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
	return &sayMeasure{NPCs: b.npcs, Says: len(lat), Clients: b.clients, DebounceMS: ms(b.debounce), MaxWaitMS: ms(b.maxWait),
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
