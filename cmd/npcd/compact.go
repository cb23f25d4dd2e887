package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/npcd/npcd/tick"
)

func compactCommand(stdout io.Writer, getenv func(string) string) *cobra.Command {
	var t target
	var instruction string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "compact NPC",
		Short: "Compact an NPC's context now, whatever its utilization",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var c *tick.Compaction
			if t.db != "" {
				a, err := t.local(ctx, getenv)
				if err != nil {
					return err
				}
				defer a.close(context.Background())
				rec, err := a.engine.Compact(ctx, args[0], instruction)
				if err != nil {
					return err
				}
				c = tick.CompactionOf(rec)
			} else {
				var err error
				if c, err = t.client().Compact(ctx, args[0], instruction); err != nil {
					return err
				}
			}
			if asJSON {
				return printJSON(stdout, map[string]any{"compaction": c})
			}
			if c == nil {
				fmt.Fprintf(stdout, "%s: nothing to compact (the recent history is within what compaction keeps)\n", args[0])
				return nil
			}
			fmt.Fprintf(stdout, "%s: compaction %d (%s, summary by %s): %d messages archived, context %d → %d tokens\n",
				args[0], c.ID, c.Trigger, c.Summarizer, c.MessagesCompacted, c.TokensBefore, c.TokensAfter)
			return nil
		},
	}
	t.flags(cmd, getenv)
	cmd.Flags().StringVar(&instruction, "instruction", "", `what the summary should favour, e.g. "keep quest details only"`)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
