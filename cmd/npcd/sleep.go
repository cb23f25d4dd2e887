package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/npcd/npcd/sleep"
)

func sleepCommand(stdout io.Writer, getenv func(string) string) *cobra.Command {
	var t target
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sleep NPC",
		Short: "Put an NPC to sleep now: consolidate its journal, compact past the sleep threshold",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var rep *sleep.Report
			if t.db != "" {
				a, err := t.local(ctx, getenv)
				if err != nil {
					return err
				}
				defer a.close(context.Background())
				if rep, err = a.engine.Sleep(ctx, args[0]); err != nil {
					return err
				}
			} else {
				var err error
				if rep, err = t.client().Sleep(ctx, args[0]); err != nil {
					return err
				}
			}
			if asJSON {
				return printJSON(stdout, rep)
			}
			if rep.Skipped {
				fmt.Fprintf(stdout, "%s: skipped (%s)\n", args[0], rep.Note)
				return nil
			}
			fmt.Fprintf(stdout, "%s: %d journal entries consolidated: %d memories added (%d superseding older ones), %d already known, %d profile facts, %d reflections\n",
				args[0], rep.Consolidated, rep.MemoriesAdded, rep.MemoriesSuperseded, rep.MemoriesSkipped, rep.ProfilesUpdated, rep.Reflections)
			if c := rep.Compaction; c != nil {
				fmt.Fprintf(stdout, "%s: compaction %d (summary by %s): %d messages archived, context %d → %d tokens\n",
					args[0], c.ID, c.Summarizer, c.MessagesCompacted, c.TokensBefore, c.TokensAfter)
			} else if rep.Note != "" {
				fmt.Fprintf(stdout, "%s: %s\n", args[0], rep.Note)
			}
			return nil
		},
	}
	t.flags(cmd, getenv)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
