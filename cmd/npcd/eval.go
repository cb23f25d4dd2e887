package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/npcd/npcd/eval"
)

func evalCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Measure npcd's memory on benchmarks",
	}
	var opts eval.Options
	var asJSON, withSleep, noCompaction bool
	locomo := &cobra.Command{
		Use:   "locomo --events FILE --questions FILE",
		Short: "Replay LoCoMo conversations through the engine and score evidence recall@k of memory search",
		Long: `Replays each conversation of the benchmark files through the real engine (one NPC per
conversation, every turn an event whose id is its dia_id, a tick after each turn, a small
window so compaction happens, a sleep between sessions), then puts each question to the NPC's
memory search and scores evidence recall@k: the share of the question's evidence dia_ids among
the sources of the top k results. Categories: 1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop, 5 adversarial; the headline is over categories 1-4.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Progress = stderr
			opts = eval.WithSleep(opts, !noCompaction, withSleep)
			if opts.Ablate == "all" {
				return ablateAll(cmd.Context(), opts, asJSON, stdout)
			}
			rep, err := eval.LoCoMo(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(stdout).Encode(rep)
			}
			rep.WriteTable(stdout)
			return nil
		},
	}
	f := locomo.Flags()
	f.StringVar(&opts.Events, "events", "", "events JSONL file (required)")
	f.StringVar(&opts.Questions, "questions", "", "questions JSONL file (required)")
	f.IntVar(&opts.Window, "window", eval.DefaultWindow, "context window of each listener NPC")
	f.IntSliceVar(&opts.Ks, "k", eval.DefaultKs, "cut-offs to score recall at")
	f.StringSliceVar(&opts.Conversations, "conversations", nil, "only these conversation ids")
	f.BoolVar(&opts.Baseline, "baseline", false, "also score plain BM25 over the raw turns, and recall at its token budget")
	f.BoolVar(&withSleep, "sleep", true, "sleep between sessions (consolidation, and compaction past 70%)")
	f.BoolVar(&noCompaction, "no-compaction", false, "run without the compactor (and without consolidation)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of the table")
	f.StringVar(&opts.Ablate, "ablate", "", "switch one signal of the memory search off ("+strings.Join(slices.Sorted(maps.Keys(eval.Ablations)), ", ")+
		`), or "all" to run once with each off and print one line per signal`)
	f.BoolVar(&opts.Details, "details", false, "with --json, add every question's recall and the event refs each result cited")
	_ = locomo.MarkFlagRequired("events")
	_ = locomo.MarkFlagRequired("questions")
	cmd.AddCommand(locomo)
	return cmd
}

// ablateAll runs the benchmark once with every signal and once with each
// signal off, and prints a line per signal (or, with asJSON, the reports).
func ablateAll(ctx context.Context, opts eval.Options, asJSON bool, stdout io.Writer) error {
	full, ablated, err := eval.AblateAll(ctx, opts)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"full": full, "ablated": ablated})
	}
	full.WriteTable(stdout)
	eval.WriteAblations(stdout, full, ablated)
	return nil
}
