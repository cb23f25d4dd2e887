package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/sleep"
)

// Diff is the "what did we lose" report of one compaction: the summary it
// wrote next to the messages it replaced, and the details of those messages
// (names, places, numbers, short quotes; see extract for the heuristic)
// that appear neither in the summary nor in any memory, journal entry,
// entity profile or the persona — Lost — or that do, and where — Kept.
// Matching ignores case and needs whole words.
type Diff struct {
	Compaction sleep.Record `json:"compaction"`
	// Summary is the [CONTEXT SUMMARY] message the compaction wrote; nil
	// for one that wrote none.
	Summary *character.Message `json:"-"`
	// Replaced are the messages it archived, oldest first: the summary it
	// replaced, if any, then the compacted span.
	Replaced []character.Message `json:"-"`
	Lost     []Candidate         `json:"lost"`
	Kept     []Candidate         `json:"kept"`
}

// maxKeptIn bounds Candidate.KeptIn.
const maxKeptIn = 3

// doc is one text a candidate may be kept in.
type doc struct {
	ref  string
	text string // lowercase
}

// Diff builds the report of compaction id of NPC npc.
func (in *Inspector) Diff(ctx context.Context, npc string, id int64) (*Diff, error) {
	c, err := in.chars.Get(ctx, npc)
	if err != nil {
		return nil, err
	}
	rec, err := in.Compaction(ctx, npc, id)
	if err != nil {
		return nil, err
	}
	d := &Diff{Compaction: *rec, Replaced: []character.Message{}, Lost: []Candidate{}, Kept: []Candidate{}}
	if d.Replaced, err = in.chars.ArchivedBy(ctx, npc, id); err != nil {
		return nil, err
	}
	if rec.SummaryMessageID > 0 {
		m, err := in.chars.MessageByID(ctx, npc, rec.SummaryMessageID)
		if err != nil {
			return nil, err
		}
		d.Summary = m
	}
	events, err := in.eventsOf(ctx, npc, d.Replaced)
	if err != nil {
		return nil, err
	}
	var order []string
	byText := map[string]*Candidate{}
	for _, m := range d.Replaced {
		for _, f := range sourceCandidates(&m, events[m.ID]) {
			key := strings.ToLower(f.text)
			cand, ok := byText[key]
			if !ok {
				cand = &Candidate{Text: f.text, Kind: f.kind}
				byText[key] = cand
				order = append(order, key)
			}
			if n := len(cand.MessageIDs); n == 0 || cand.MessageIDs[n-1] != m.ID {
				cand.MessageIDs = append(cand.MessageIDs, m.ID)
			}
		}
	}
	if len(order) == 0 {
		return d, nil
	}
	docs, err := in.keptDocs(ctx, c, d.Summary)
	if err != nil {
		return nil, err
	}
	for _, key := range order {
		cand := byText[key]
		cand.KeptIn = []string{}
		for _, dc := range docs {
			if containsWord(dc.text, key) {
				cand.KeptIn = append(cand.KeptIn, dc.ref)
				if len(cand.KeptIn) == maxKeptIn {
					break
				}
			}
		}
		if len(cand.KeptIn) == 0 {
			d.Lost = append(d.Lost, *cand)
		} else {
			d.Kept = append(d.Kept, *cand)
		}
	}
	return d, nil
}

// eventsOf returns the perceived events behind the user messages of ms.
func (in *Inspector) eventsOf(ctx context.Context, npc string, ms []character.Message) (map[int64][]character.Event, error) {
	var ids []int64
	for _, m := range ms {
		if m.Role == "user" {
			ids = append(ids, m.ID)
		}
	}
	return in.chars.EventsOf(ctx, npc, ids)
}

// sourceCandidates extracts the candidates of one replaced message. A
// perceived message is read from its events, so their actors and targets
// count as names and their rooms as places, and the quoting the tick adds
// around speech does not make every utterance a quote. An assistant
// message includes the string arguments of its tool calls (what it said).
func sourceCandidates(m *character.Message, evs []character.Event) []found {
	var out []found
	switch {
	case m.Role == "user" && len(evs) > 0:
		for _, ev := range evs {
			for _, who := range []string{ev.Actor, ev.Target} {
				if who = strings.TrimSpace(who); who != "" {
					out = append(out, found{who, KindName})
				}
			}
			if room := strings.TrimSpace(ev.Room); room != "" {
				out = append(out, found{room, KindPlace})
			}
			out = append(out, extract(ev.Text)...)
		}
	case m.Summary:
		out = append(out, extract(strings.TrimPrefix(m.Content, character.SummaryPrefix))...)
	case m.Role == "user":
		out = append(out, extract(stripStamps(m.Content))...)
	default:
		out = append(out, extract(m.Content)...)
		for _, tc := range m.ToolCalls.V {
			for _, s := range stringArgs(tc.Args) {
				out = append(out, extract(s)...)
			}
		}
	}
	return out
}

// stripStamps drops the "[2026-11-21 10:02] " the tick puts at the head of
// each perceived line.
func stripStamps(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "[") {
			if end := strings.Index(l, "] "); end > 0 && end < 32 {
				lines[i] = l[end+2:]
			}
		}
	}
	return strings.Join(lines, "\n")
}

// stringArgs returns the string values of a tool call's JSON arguments.
func stringArgs(args string) []string {
	var v any
	if json.Unmarshal([]byte(args), &v) != nil {
		return nil
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// keptDocs returns every text a detail may be kept in, the summary first.
func (in *Inspector) keptDocs(ctx context.Context, c *character.Character, summary *character.Message) ([]doc, error) {
	var docs []doc
	if summary != nil {
		docs = append(docs, doc{fmt.Sprintf("m:%d", summary.ID), strings.ToLower(summary.Content)})
	}
	mems, err := in.journal.MemoryTexts(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	for _, m := range mems {
		docs = append(docs, doc{fmt.Sprintf("mem:%d", m.ID), strings.ToLower(m.Entity + "\n" + m.Content)})
	}
	entries, err := in.journal.EntryTexts(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		docs = append(docs, doc{fmt.Sprintf("j:%d", e.ID), strings.ToLower(e.Content)})
	}
	ps, err := in.chars.Profiles(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		var b strings.Builder
		b.WriteString(p.Entity + "\n" + p.Name + "\n" + p.Description)
		for _, f := range p.Facts {
			b.WriteString("\n" + f.Content)
		}
		docs = append(docs, doc{"profile:" + p.Entity, strings.ToLower(b.String())})
	}
	docs = append(docs, doc{"persona", strings.ToLower(c.Name + "\n" + c.Persona)})
	return docs, nil
}
