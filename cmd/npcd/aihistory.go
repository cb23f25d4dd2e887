package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/npcd/npcd/aihistory"
	"github.com/npcd/npcd/api"
)

// aihistoryOptions are the flags of npcd aihistory: where to read, and the
// views' own.
type aihistoryOptions struct {
	target target
	aihistory.Options
}

func aihistoryCommand(stdout io.Writer, getenv func(string) string) *cobra.Command {
	o := &aihistoryOptions{}
	cmd := &cobra.Command{
		Use:   "aihistory NPC [view] [args]",
		Short: "Inspect what an NPC knows, and why",
		Long:  aihistory.Long(),
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAIHistory(cmd, stdout, getenv, o, args)
		},
	}
	o.target.flags(cmd, getenv)
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "print the API's JSON response")
	f.IntVar(&o.Limit, "limit", 0, "rows per page (history, journal: default 100; compactions: all); ticks (timeline)")
	f.Int64Var(&o.Before, "before", 0, "only rows with an id below this: the next page (history, journal, compactions)")
	f.BoolVar(&o.Archived, "archived", false, "history: archived messages instead of live ones")
	f.BoolVar(&o.All, "all", false, "history: live and archived messages")
	f.Int64Var(&o.Turn, "turn", 0, "history: only this turn (live and archived)")
	f.StringVar(&o.Type, "type", "", "journal: only this type (observation, conversation, reflection, note, fact, context_synthesis)")
	f.IntVarP(&o.K, "k", "k", api.DefaultMemoryK, "memory: how many results")
	f.StringVar(&o.Out, "out", "", "timeline: draw the chart into this .png or .svg file")
	f.Int64Var(&o.From, "from", 0, "timeline: first tick")
	f.Int64Var(&o.To, "to", 0, "timeline: last tick")
	f.IntVar(&o.Width, "width", 0, "timeline: picture width in pixels (default 1400, up to 2400 for long runs), or chart columns in the terminal")
	f.IntVar(&o.Height, "height", 0, "timeline: picture height in pixels (default 500), or chart rows in the terminal")
	return cmd
}

func runAIHistory(cmd *cobra.Command, stdout io.Writer, getenv func(string) string, o *aihistoryOptions, args []string) error {
	s, v, err := aihistory.Parse(args, cmd.Flags(), &o.Options)
	if err != nil {
		return err
	}
	s.Out, s.Cols = stdout, columns(getenv)
	ctx := cmd.Context()
	client, done, err := o.target.inspection(ctx, getenv)
	if err != nil {
		return err
	}
	defer done()
	s.Client, s.FromDB = client, o.target.db != ""
	return v.Run(s, ctx, s.Args)
}

// columns is the terminal width: $COLUMNS, else 120.
func columns(getenv func(string) string) int {
	if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n >= 60 {
		return n
	}
	return 120
}

// inspection returns a client of the inspection routes: of the daemon, or,
// with --db, of the same API served in-process over the database file
// opened read-only. done releases what it opened.
func (t *target) inspection(ctx context.Context, getenv func(string) string) (*api.Client, func(), error) {
	if t.db == "" {
		return t.client(), func() {}, nil
	}
	if err := existingDB(t.db); err != nil {
		return nil, nil, err
	}
	cfg, err := configFromEnv(getenv)
	if err != nil {
		return nil, nil, err
	}
	// In-process, nothing crosses a network: no token to check.
	cfg.DB, cfg.DBDriver, cfg.APIToken = t.db, "sqlite", ""
	a, err := openApp(ctx, cfg, zerolog.Nop(), appOptions{readOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("--db %s: %w", t.db, err)
	}
	return api.NewInProcessClient("http://"+filepath.Base(t.db), a.server), func() { a.close(context.Background()) }, nil
}
