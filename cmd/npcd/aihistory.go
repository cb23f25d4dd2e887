package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/npcd/npcd/aihistory"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/npcd/npcd/api"
)

// aihistoryOptions are the flags of npcd aihistory: where to read, and the
// views' own.
type aihistoryOptions struct {
	target target
	aihistory.Options
}

// commonFlags apply to every view.
var commonFlags = map[string]bool{"server": true, "db": true, "json": true}

func aihistoryLong() string {
	var b strings.Builder
	b.WriteString(`Inspect what an NPC knows, and why: its context, history, journal, beliefs,
memories and compactions. Against a running daemon (--server, token from
NPCD_API_TOKEN) or directly on a database file (--db, opened read-only: safe
while the daemon runs). Tables for people, --json for machines (the API's
response). Long lists are paged: --limit rows, --before ID for older ones; the
footer says how to get the next page.

Views:
`)
	for _, v := range aihistory.Views() {
		name := v.Name
		if v.Args != "" {
			name += " " + v.Args
		}
		fmt.Fprintf(&b, "  %-16s %s\n", name, v.Short)
	}
	b.WriteString(`
Examples:
  npcd aihistory brom
  npcd aihistory brom history --archived --limit 50
  npcd aihistory brom memory "the lost sword"
  npcd aihistory brom diff 12
  npcd aihistory brom show j:45
  npcd aihistory brom as-of 300
  npcd aihistory brom timeline --out brom.png
  npcd aihistory brom compactions --db ./npcd.db --json`)
	return b.String()
}

func aihistoryCommand(stdout io.Writer, getenv func(string) string) *cobra.Command {
	o := &aihistoryOptions{}
	cmd := &cobra.Command{
		Use:   "aihistory NPC [view] [args]",
		Short: "Inspect what an NPC knows, and why",
		Long:  aihistoryLong(),
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
	npc, name, rest := args[0], "overview", args[1:]
	if len(rest) > 0 {
		name, rest = rest[0], rest[1:]
	}
	var v *aihistory.View
	views := aihistory.Views()
	var names []string
	for i := range views {
		names = append(names, views[i].Name)
		if views[i].Name == name {
			v = &views[i]
		}
	}
	if v == nil {
		return fmt.Errorf("aihistory: unknown view %q; views: %s", name, strings.Join(names, ", "))
	}
	switch {
	case len(rest) < v.MinArgs:
		return fmt.Errorf("aihistory %s: needs %s", v.Name, v.Args)
	case v.MaxArgs == 0 && len(rest) > 0:
		return fmt.Errorf("aihistory %s takes no arguments, got %q", v.Name, strings.Join(rest, " "))
	case v.MaxArgs > 0 && len(rest) > v.MaxArgs:
		return fmt.Errorf("aihistory %s: too many arguments; wants %s", v.Name, v.Args)
	}
	s := &aihistory.Session{NPC: npc, View: v.Name, Args: rest, Out: stdout, Opt: &o.Options, Cols: columns(getenv)}
	var given []*pflag.Flag
	allowed := map[string]bool{}
	for _, f := range v.Flags {
		allowed[f] = true
	}
	var bad error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if !commonFlags[f.Name] && !allowed[f.Name] && bad == nil {
			bad = fmt.Errorf("aihistory %s: --%s does not apply to this view (%s)", v.Name, f.Name, flagUsers(f.Name))
		}
		given = append(given, f)
	})
	if bad != nil {
		return bad
	}
	if o.Archived && o.All {
		return errors.New("aihistory history: --archived and --all exclude each other")
	}
	ctx := cmd.Context()
	client, done, err := o.target.inspection(ctx, getenv)
	if err != nil {
		return err
	}
	defer done()
	s.Client, s.FromDB = client, o.target.db != ""
	s.Again = func(extra ...string) string { return again(s, given, extra...) }
	return v.Run(s, ctx, rest)
}

// flagUsers names the views a flag applies to.
func flagUsers(flag string) string {
	var users []string
	for _, v := range aihistory.Views() {
		for _, f := range v.Flags {
			if f == flag {
				users = append(users, v.Name)
			}
		}
	}
	return "it applies to " + strings.Join(users, ", ")
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
	hc := &http.Client{Transport: handlerTransport{h: a.server}}
	return api.NewClient("http://"+filepath.Base(t.db), "", hc), func() { a.close(context.Background()) }, nil
}

// again is the command line that repeats session s, run with the flags
// given, with extra flags (the next-page hint of a footer); a flag in extra
// replaces the one given.
func again(s *aihistory.Session, given []*pflag.Flag, extra ...string) string {
	parts := []string{"npcd", "aihistory", s.NPC, s.View}
	for _, a := range s.Args {
		parts = append(parts, shellQuote(a))
	}
	replaced := map[string]bool{}
	for i := 0; i+1 < len(extra); i += 2 {
		replaced[strings.TrimPrefix(extra[i], "--")] = true
	}
	for _, f := range given {
		switch {
		case replaced[f.Name]:
		case f.Value.Type() == "bool":
			parts = append(parts, "--"+f.Name)
		default:
			parts = append(parts, "--"+f.Name, shellQuote(f.Value.String()))
		}
	}
	return strings.Join(append(parts, extra...), " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[](){}<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
