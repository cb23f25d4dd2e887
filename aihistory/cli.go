package aihistory

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// commonFlags apply to every view.
var commonFlags = map[string]bool{"server": true, "db": true, "json": true}

// Long is the help of `npcd aihistory`: what it shows, the views, examples.
func Long() string {
	var b strings.Builder
	b.WriteString(`Inspect what an NPC knows, and why: its context, history, journal, beliefs,
memories and compactions. Against a running daemon (--server, token from
NPCD_API_TOKEN) or directly on a database file (--db, opened read-only: safe
while the daemon runs). Tables for people, --json for machines (the API's
response). Long lists are paged: --limit rows, --before ID for older ones; the
footer says how to get the next page.

Views:
`)
	for _, v := range Views() {
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

// Parse reads a command line's arguments (NPC [view] [args]) and the
// flags given on it, and returns the session it asks for, before a client
// is attached: the view must exist, take those arguments and those flags.
func Parse(args []string, flags *pflag.FlagSet, o *Options) (*Session, *View, error) {
	npc, name, rest := args[0], "overview", args[1:]
	if len(rest) > 0 {
		name, rest = rest[0], rest[1:]
	}
	var v *View
	views := Views()
	var names []string
	for i := range views {
		names = append(names, views[i].Name)
		if views[i].Name == name {
			v = &views[i]
		}
	}
	if v == nil {
		return nil, nil, fmt.Errorf("aihistory: unknown view %q; views: %s", name, strings.Join(names, ", "))
	}
	switch {
	case len(rest) < v.MinArgs:
		return nil, nil, fmt.Errorf("aihistory %s: needs %s", v.Name, v.Args)
	case v.MaxArgs == 0 && len(rest) > 0:
		return nil, nil, fmt.Errorf("aihistory %s takes no arguments, got %q", v.Name, strings.Join(rest, " "))
	case v.MaxArgs > 0 && len(rest) > v.MaxArgs:
		return nil, nil, fmt.Errorf("aihistory %s: too many arguments; wants %s", v.Name, v.Args)
	}
	s := &Session{NPC: npc, View: v.Name, Args: rest, Opt: o}
	var given []*pflag.Flag
	allowed := map[string]bool{}
	for _, f := range v.Flags {
		allowed[f] = true
	}
	var bad error
	flags.Visit(func(f *pflag.Flag) {
		if !commonFlags[f.Name] && !allowed[f.Name] && bad == nil {
			bad = fmt.Errorf("aihistory %s: --%s does not apply to this view (%s)", v.Name, f.Name, flagUsers(f.Name))
		}
		given = append(given, f)
	})
	if bad != nil {
		return nil, nil, bad
	}
	if o.Archived && o.All {
		return nil, nil, errors.New("aihistory history: --archived and --all exclude each other")
	}
	s.Again = func(extra ...string) string { return again(s, given, extra...) }
	return s, v, nil
}

// flagUsers names the views a flag applies to.
func flagUsers(flag string) string {
	var users []string
	for _, v := range Views() {
		for _, f := range v.Flags {
			if f == flag {
				users = append(users, v.Name)
			}
		}
	}
	return "it applies to " + strings.Join(users, ", ")
}

// again is the command line that repeats session s, run with the flags
// given, with extra flags (the next-page hint of a footer); a flag in extra
// replaces the one given.
func again(s *Session, given []*pflag.Flag, extra ...string) string {
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
