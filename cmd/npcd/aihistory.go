package main

import (
	"context"
	"errors"
	"fmt"
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

// aihistoryOptions are the flags of npcd aihistory.
type aihistoryOptions struct {
	target   target
	asJSON   bool
	limit    int
	before   int64
	archived bool
	all      bool
	turn     int64
	typ      string
	k        int
	out      string
	from, to int64
	width    int
	height   int
}

// aihView is one view of npcd aihistory: its arguments, the flags it takes
// besides the common ones, and how it runs. Each view reads one API route
// through the client and renders it.
type aihView struct {
	name    string
	args    string // usage of its arguments
	short   string
	minArgs int
	maxArgs int // -1: any number
	flags   []string
	run     func(s *session, ctx context.Context, args []string) error
}

// session is one run of npcd aihistory.
type session struct {
	client *api.Client
	npc    string
	view   string
	args   []string
	out    io.Writer
	opt    *aihistoryOptions
	cols   int  // terminal width
	fromDB bool // reading a database file, not a daemon
	// given are the flags on the command line, in order, for the hint
	// that repeats the command for the next page.
	given []*pflag.Flag
}

// commonFlags apply to every view.
var commonFlags = map[string]bool{"server": true, "db": true, "json": true}

func aihistoryViews() []aihView {
	return []aihView{
		{name: "overview", short: "context utilization, compactions, the current summary, next sleep (the default)", run: (*session).overview},
		{name: "history", short: "live messages with roles, masked markers and compaction boundaries",
			flags: []string{"limit", "before", "archived", "all", "turn"}, run: (*session).history},
		{name: "journal", short: "journal entries", flags: []string{"limit", "before", "type"}, run: (*session).journal},
		{name: "profiles", short: "what the NPC believes about each entity, superseded beliefs included", run: (*session).profiles},
		{name: "memory", args: "QUERY...", short: "what a memory search recalls, with score parts and sources", minArgs: 1, maxArgs: -1,
			flags: []string{"k"}, run: (*session).memory},
		{name: "compactions", short: "every compaction: trigger, tokens before and after, span, summary",
			flags: []string{"limit", "before"}, run: (*session).compactions},
		{name: "diff", args: "ID", short: "a compaction's summary next to what it replaced, and what was lost", minArgs: 1, maxArgs: 1,
			run: (*session).diff},
		{name: "show", args: "REF", short: "one message (m:ID or ID), journal entry (j:ID) or memory (mem:ID) in full", minArgs: 1, maxArgs: 1,
			run: (*session).show},
		{name: "as-of", args: "TICK", short: "the live context and summary as they were at the end of a tick", minArgs: 1, maxArgs: 1,
			run: (*session).asOf},
		{name: "timeline", short: "context utilization over ticks with compaction markers; --out FILE.png|.svg draws it",
			flags: []string{"out", "from", "to", "limit", "width", "height"}, run: (*session).timeline},
	}
}

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
	for _, v := range aihistoryViews() {
		name := v.name
		if v.args != "" {
			name += " " + v.args
		}
		fmt.Fprintf(&b, "  %-16s %s\n", name, v.short)
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
	f.BoolVar(&o.asJSON, "json", false, "print the API's JSON response")
	f.IntVar(&o.limit, "limit", 0, "rows per page (history, journal: default 100; compactions: all); ticks (timeline)")
	f.Int64Var(&o.before, "before", 0, "only rows with an id below this: the next page (history, journal, compactions)")
	f.BoolVar(&o.archived, "archived", false, "history: archived messages instead of live ones")
	f.BoolVar(&o.all, "all", false, "history: live and archived messages")
	f.Int64Var(&o.turn, "turn", 0, "history: only this turn (live and archived)")
	f.StringVar(&o.typ, "type", "", "journal: only this type (observation, conversation, reflection, note, fact, context_synthesis)")
	f.IntVarP(&o.k, "k", "k", api.DefaultMemoryK, "memory: how many results")
	f.StringVar(&o.out, "out", "", "timeline: draw the chart into this .png or .svg file")
	f.Int64Var(&o.from, "from", 0, "timeline: first tick")
	f.Int64Var(&o.to, "to", 0, "timeline: last tick")
	f.IntVar(&o.width, "width", 0, "timeline: picture width in pixels (default 1400, up to 2400 for long runs), or chart columns in the terminal")
	f.IntVar(&o.height, "height", 0, "timeline: picture height in pixels (default 500), or chart rows in the terminal")
	return cmd
}

func runAIHistory(cmd *cobra.Command, stdout io.Writer, getenv func(string) string, o *aihistoryOptions, args []string) error {
	npc, name, rest := args[0], "overview", args[1:]
	if len(rest) > 0 {
		name, rest = rest[0], rest[1:]
	}
	var v *aihView
	views := aihistoryViews()
	var names []string
	for i := range views {
		names = append(names, views[i].name)
		if views[i].name == name {
			v = &views[i]
		}
	}
	if v == nil {
		return fmt.Errorf("aihistory: unknown view %q; views: %s", name, strings.Join(names, ", "))
	}
	switch {
	case len(rest) < v.minArgs:
		return fmt.Errorf("aihistory %s: needs %s", v.name, v.args)
	case v.maxArgs == 0 && len(rest) > 0:
		return fmt.Errorf("aihistory %s takes no arguments, got %q", v.name, strings.Join(rest, " "))
	case v.maxArgs > 0 && len(rest) > v.maxArgs:
		return fmt.Errorf("aihistory %s: too many arguments; wants %s", v.name, v.args)
	}
	s := &session{npc: npc, view: v.name, args: rest, out: stdout, opt: o, cols: columns(getenv)}
	allowed := map[string]bool{}
	for _, f := range v.flags {
		allowed[f] = true
	}
	var bad error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if !commonFlags[f.Name] && !allowed[f.Name] && bad == nil {
			bad = fmt.Errorf("aihistory %s: --%s does not apply to this view (%s)", v.name, f.Name, flagUsers(f.Name))
		}
		s.given = append(s.given, f)
	})
	if bad != nil {
		return bad
	}
	if o.archived && o.all {
		return errors.New("aihistory history: --archived and --all exclude each other")
	}
	ctx := cmd.Context()
	client, done, err := o.target.inspection(ctx, getenv)
	if err != nil {
		return err
	}
	defer done()
	s.client, s.fromDB = client, o.target.db != ""
	return v.run(s, ctx, rest)
}

// flagUsers names the views a flag applies to.
func flagUsers(flag string) string {
	var users []string
	for _, v := range aihistoryViews() {
		for _, f := range v.flags {
			if f == flag {
				users = append(users, v.name)
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

// again is the command line that repeats this one with extra flags (the
// next-page hint of a footer); a flag in extra replaces the one given.
func (s *session) again(extra ...string) string {
	parts := []string{"npcd", "aihistory", s.npc, s.view}
	for _, a := range s.args {
		parts = append(parts, shellQuote(a))
	}
	replaced := map[string]bool{}
	for i := 0; i+1 < len(extra); i += 2 {
		replaced[strings.TrimPrefix(extra[i], "--")] = true
	}
	for _, f := range s.given {
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
