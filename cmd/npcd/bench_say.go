package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/npcd/npcd/bench"
)

func benchSayCommand(stdout io.Writer, h bench.Harness) *cobra.Command {
	var b bench.SayOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "say",
		Short: "Latency from a say event to the NPC's action on the action stream, with auto-tick",
		Long: `Runs the real daemon on a loopback port (builtin model, temporary database), registers NPCs
with auto-tick, opens GET /v1/actions/stream and has concurrent clients post a say event to one
NPC at a time; each latency runs from the event's POST to the NPC's tick arriving on the stream
(the debounce included). Reports p50/p95/p99 in milliseconds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := bench.Say(cmd.Context(), h, b)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(stdout).Encode(m)
			}
			_, err = fmt.Fprintf(stdout, "say → action on the stream: %d NPCs, %d says, %d clients, debounce %s: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms (%.0f says/s, %.2f ms CPU a say)\n",
				m.NPCs, m.Says, m.Clients, b.Debounce, m.P50MS, m.P95MS, m.P99MS, m.MaxMS, m.SaysPerS, m.CPUMSPerSay)
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&b.NPCs, "npcs", 200, "NPCs, each with auto-tick")
	f.IntVar(&b.Says, "says", 2000, "say events to measure")
	f.IntVar(&b.Clients, "clients", 20, "clients posting at once (each waits for its NPC's action before the next say)")
	f.DurationVar(&b.Debounce, "debounce", 10*time.Millisecond, "the NPCs' auto_tick.debounce_ms")
	f.DurationVar(&b.MaxWait, "max-wait", 100*time.Millisecond, "the NPCs' auto_tick.max_wait_ms")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
