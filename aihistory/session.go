package aihistory

import (
	"context"
	"encoding/json"
	"io"

	"github.com/npcd/npcd/api"
)

// Options are the view flags of `npcd aihistory`; the zero value asks for
// each view's defaults.
type Options struct {
	JSON     bool   // print the API's JSON response
	Limit    int    // rows per page (history, journal, compactions); ticks (timeline)
	Before   int64  // only rows with an id below this: the next page
	Archived bool   // history: archived messages instead of live ones
	All      bool   // history: live and archived messages
	Turn     int64  // history: only this turn
	Type     string // journal: only this entry type
	K        int    // memory: how many results
	Out      string // timeline: draw into this .png or .svg file
	From, To int64  // timeline: tick range
	Width    int    // timeline: picture width in pixels, or chart columns
	Height   int    // timeline: picture height in pixels, or chart rows
}

// Session is one run of a view. Out receives the rendering; Again, when
// set, returns the command line that repeats this one with extra flags
// (the next-page hint of a footer).
type Session struct {
	Client *api.Client
	NPC    string
	View   string
	Args   []string
	Out    io.Writer
	Opt    *Options
	Cols   int  // terminal width
	FromDB bool // reading a database file, not a daemon
	Again  func(extra ...string) string
}

// View is one view: its arguments, the flags it takes besides the common
// ones, and how it runs. Each view reads one API route and renders it.
type View struct {
	Name    string
	Args    string // usage of its arguments
	Short   string
	MinArgs int
	MaxArgs int // -1: any number
	Flags   []string
	Run     func(s *Session, ctx context.Context, args []string) error
}

// Views lists every view, the default (overview) first.
func Views() []View {
	return []View{
		{Name: "overview", Short: "context utilization, compactions, the current summary, next sleep (the default)", Run: (*Session).overview},
		{Name: "history", Short: "live messages with roles, masked markers and compaction boundaries",
			Flags: []string{"limit", "before", "archived", "all", "turn"}, Run: (*Session).history},
		{Name: "journal", Short: "journal entries", Flags: []string{"limit", "before", "type"}, Run: (*Session).journal},
		{Name: "profiles", Short: "what the NPC believes about each entity, superseded beliefs included", Run: (*Session).profiles},
		{Name: "memory", Args: "QUERY...", Short: "what a memory search recalls, with score parts and sources", MinArgs: 1, MaxArgs: -1,
			Flags: []string{"k"}, Run: (*Session).memory},
		{Name: "compactions", Short: "every compaction: trigger, tokens before and after, span, summary",
			Flags: []string{"limit", "before"}, Run: (*Session).compactions},
		{Name: "diff", Args: "ID", Short: "a compaction's summary next to what it replaced, and what was lost", MinArgs: 1, MaxArgs: 1,
			Run: (*Session).diff},
		{Name: "show", Args: "REF", Short: "one message (m:ID or ID), journal entry (j:ID) or memory (mem:ID) in full", MinArgs: 1, MaxArgs: 1,
			Run: (*Session).show},
		{Name: "as-of", Args: "TICK", Short: "the live context and summary as they were at the end of a tick", MinArgs: 1, MaxArgs: 1,
			Run: (*Session).asOf},
		{Name: "timeline", Short: "context utilization over ticks with compaction markers; --out FILE.png|.svg draws it",
			Flags: []string{"out", "from", "to", "limit", "width", "height"}, Run: (*Session).timeline},
	}
}

// TriggerLetter is the letter that marks a compaction of trigger on a
// timeline.
func TriggerLetter(trigger string) byte { return styleOf(trigger).letter }

// again is the next-page hint, or nothing when the caller gave no Again.
func (s *Session) again(extra ...string) string {
	if s.Again == nil {
		return ""
	}
	return s.Again(extra...)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
