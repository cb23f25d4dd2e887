package aihistory

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/npcd/npcd/internal/text"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	ptext "github.com/jedib0t/go-pretty/v6/text"

	"github.com/npcd/npcd/api"
	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
)

func (s *Session) overview(ctx context.Context, _ []string) error {
	o, err := s.Client.Overview(ctx, s.NPC)
	if err != nil {
		return err
	}
	if s.Opt.JSON {
		return printJSON(s.Out, o)
	}
	w := s.Out
	fmt.Fprintf(w, "%s (%s) · model %s · tick %d, turn %d · game time %s\n\n", o.Name, o.NPC, o.Model, o.Tick, o.Turn, when(o.GameTime))
	c := o.Context
	kv(w, "context", fmt.Sprintf("%s %.1f%% of %s tokens: %s = system %s + tools %s + summary %s + history %s",
		bar(c.Utilization, 20), 100*c.Utilization, text.Thousands(c.Window), text.Thousands(c.Tokens), text.Thousands(c.SystemTokens), text.Thousands(c.ToolTokens),
		text.Thousands(c.SummaryTokens), text.Thousands(c.HistoryTokens)))
	kv(w, "", fmt.Sprintf("a sleep compacts past %.0f%%, a tick compacts at %.0f%% (emergency)",
		100*o.Compaction.SleepThreshold, 100*o.Compaction.EmergencyThreshold))
	kv(w, "messages", fmt.Sprintf("%s live, %s archived", text.Thousands(c.LiveMessages), text.Thousands(c.ArchivedMessages)))
	comp := fmt.Sprintf("%d", c.Compactions)
	if len(o.CompactionsByTrigger) > 0 {
		comp += ": " + text.Counts(o.CompactionsByTrigger)
	}
	if r := o.LastCompaction; r != nil {
		comp += fmt.Sprintf(" · last #%d (%s, after tick %d): %s → %s tokens, %d messages, summary by %s",
			r.ID, r.Trigger, r.Tick, text.Thousands(r.TokensBefore), text.Thousands(r.TokensAfter), r.MessagesCompacted, r.Summarizer)
	}
	kv(w, "compactions", comp)
	for _, warn := range o.Warnings {
		kv(w, "warning", warn)
	}
	kv(w, "sleep", sleepLine(o.Sleep, s.FromDB))
	k := o.Knowledge
	entries := 0
	for _, n := range k.JournalByType {
		entries += n
	}
	kv(w, "journal", fmt.Sprintf("%s entries (%s), %s not yet consolidated", text.Thousands(entries), text.Counts(k.JournalByType), text.Thousands(k.Unconsolidated)))
	kv(w, "memory", fmt.Sprintf("%s memories (+%s superseded) · %s profiles, %s facts (+%s superseded)",
		text.Thousands(k.Memories), text.Thousands(k.SupersededMemories), text.Thousands(k.Profiles), text.Thousands(k.Facts), text.Thousands(k.SupersededFacts)))
	waiting := "no tool results"
	if len(o.Awaiting) > 0 {
		waiting = "results of " + strings.Join(o.Awaiting, ", ")
	}
	kv(w, "inbox", fmt.Sprintf("%s pending events, waiting for %s", text.Thousands(o.PendingEvents), waiting))
	fmt.Fprintln(w)
	if o.Summary == nil {
		fmt.Fprintln(w, "No [CONTEXT SUMMARY]: the history has not been compacted yet.")
		return nil
	}
	fmt.Fprintf(w, "%s\n", summaryTitle(o.Summary, o.LastCompaction))
	block(w, summaryText(o.Summary.Content), "  ")
	return nil
}

func sleepLine(st api.SleepStatus, fromDB bool) string {
	sched := "world default schedule"
	if st.Cron != "" {
		sched = fmt.Sprintf("schedule %q", st.Cron)
		if st.Timezone != "" {
			sched += " " + st.Timezone
		}
	}
	next := "next: unknown"
	switch {
	case !st.Known && fromDB:
		next = "next: unknown (read from the database file; ask the daemon, without --db)"
	case st.NextRun != nil:
		next = "next " + when(*st.NextRun)
	case st.Known:
		next = "not scheduled"
	}
	last := "never slept"
	if st.LastSleepAt != nil {
		last = "last slept " + when(*st.LastSleepAt)
	}
	return next + " · " + sched + " · " + last
}

func summaryTitle(m *api.Message, rec *sleep.Record) string {
	t := fmt.Sprintf("[CONTEXT SUMMARY] m:%d · %s tokens", m.ID, text.Thousands(m.Tokens))
	if id, ok := metaInt(m.Metadata, "compaction_id"); ok {
		t += fmt.Sprintf(" · written by compaction #%d", id)
		if trig, ok := m.Metadata["trigger"].(string); ok {
			t += " (" + trig + ")"
		}
	} else if rec != nil {
		t += fmt.Sprintf(" · compaction #%d", rec.ID)
	}
	if n, ok := metaInt(m.Metadata, "rewrite"); ok {
		t += fmt.Sprintf(" · rewrite %d", n)
	}
	if lo, ok := metaInt(m.Metadata, "first_source_message_id"); ok {
		hi, _ := metaInt(m.Metadata, "last_source_message_id")
		t += fmt.Sprintf(" · replaced m:%d–m:%d", lo, hi)
	}
	return t
}

func summaryText(content string) string {
	return strings.TrimSpace(strings.TrimPrefix(content, character.SummaryPrefix))
}

func (s *Session) history(ctx context.Context, _ []string) error {
	hq := api.HistoryQuery{State: character.StateLive, Turn: s.Opt.Turn, Limit: s.Opt.Limit, Before: s.Opt.Before}
	switch {
	case s.Opt.Archived:
		hq.State = character.StateArchived
	case s.Opt.All || s.Opt.Turn > 0:
		hq.State = "all"
	}
	page, err := s.Client.HistoryPage(ctx, s.NPC, hq)
	if err != nil {
		return err
	}
	if s.Opt.JSON {
		return printJSON(s.Out, page)
	}
	recs := map[int64]*sleep.Record{}
	for i := range page.Compactions {
		recs[page.Compactions[i].ID] = &page.Compactions[i]
	}
	what := map[string]string{character.StateLive: "live messages", character.StateArchived: "archived messages", "all": "messages"}[hq.State]
	if len(page.Messages) == 0 {
		fmt.Fprintf(s.Out, "%s has no %s%s.\n", s.NPC, what, turnNote(hq.Turn))
		return nil
	}
	first, last := page.Messages[0].ID, page.Messages[len(page.Messages)-1].ID
	ms := page.Messages
	if hq.State == character.StateLive {
		ms = summaryFirst(ms)
	}
	s.messageTable(ms, recs)
	fmt.Fprintf(s.Out, "%d %s%s, m:%d–m:%d, oldest first.", len(page.Messages), what, turnNote(hq.Turn), first, last)
	if page.NextBefore != nil {
		fmt.Fprintf(s.Out, " Older: %s", s.again("--before", strconv.FormatInt(*page.NextBefore, 10)))
	}
	fmt.Fprintln(s.Out)
	return nil
}

// summaryFirst orders live messages as the model gets them: the summary
// at the head.
func summaryFirst(ms []api.Message) []api.Message {
	out := make([]api.Message, 0, len(ms))
	for _, m := range ms {
		if m.Summary {
			out = append(out, m)
		}
	}
	for _, m := range ms {
		if !m.Summary {
			out = append(out, m)
		}
	}
	return out
}

func turnNote(turn int64) string {
	if turn == 0 {
		return ""
	}
	return fmt.Sprintf(" of turn %d", turn)
}

// messageTable renders messages with a line where each compaction's span
// begins (archived messages) and the summary marked as such.
func (s *Session) messageTable(ms []api.Message, recs map[int64]*sleep.Record) {
	t := s.table("id", "turn", "tick", "role", "tokens", "content")
	t.SetColumnConfigs([]table.ColumnConfig{{Number: 2, Align: ptext.AlignRight}, {Number: 3, Align: ptext.AlignRight}, {Number: 5, Align: ptext.AlignRight}})
	width := s.rest(52)
	var group int64 = -1
	for _, m := range ms {
		g := int64(0)
		if m.CompactionID != nil {
			g = *m.CompactionID
		}
		if g != group {
			switch {
			case g > 0:
				t.AppendRow(table.Row{"", "", "", "", "", text.ClipRunes(boundary(g, recs[g]), width)})
			case group > 0:
				t.AppendRow(table.Row{"", "", "", "", "", "── live ──"})
			}
			group = g
		}
		role := m.Role
		switch {
		case m.Summary:
			role = "summary"
		case m.Masked:
			role += " ⊘masked"
		case m.Offloaded:
			role += " ✂offloaded"
		}
		t.AppendRow(table.Row{"m:" + strconv.FormatInt(m.ID, 10), m.Turn, m.Tick, role, m.Tokens, text.ClipRunes(messageLine(&m, recs), width)})
	}
	t.Render()
}

// boundary labels the start of the span a compaction archived.
func boundary(id int64, rec *sleep.Record) string {
	if rec == nil {
		return fmt.Sprintf("── archived by compaction #%d ──", id)
	}
	return fmt.Sprintf("── archived by compaction #%d (%s, after tick %d): %d messages, %s → %s tokens, summary m:%d ──",
		id, rec.Trigger, rec.Tick, rec.MessagesCompacted, text.Thousands(rec.TokensBefore), text.Thousands(rec.TokensAfter), rec.SummaryMessageID)
}

// messageLine is a message on one line: what was perceived, said, done or
// returned.
func messageLine(m *api.Message, recs map[int64]*sleep.Record) string {
	if m.Summary {
		line := "[CONTEXT SUMMARY]"
		if id, ok := metaInt(m.Metadata, "compaction_id"); ok {
			line += fmt.Sprintf(" by compaction #%d", id)
			if r := recs[id]; r != nil {
				line += " (" + r.Trigger + ")"
			}
		}
		return line + ": " + text.OneLine(summaryText(m.Content))
	}
	var parts []string
	if strings.TrimSpace(m.Content) != "" {
		parts = append(parts, text.OneLine(m.Content))
	}
	for _, tc := range m.ToolCalls {
		parts = append(parts, callLine(tc))
	}
	line := strings.Join(parts, " · ")
	if m.Role == "tool" && m.ToolName != "" {
		line = "→ " + m.ToolName + ": " + line
	}
	return line
}

func callLine(tc api.ToolCall) string {
	var args map[string]any
	if json.Unmarshal(tc.Args, &args) == nil {
		if said, ok := args["text"].(string); ok && len(args) == 1 {
			return fmt.Sprintf("%s: %s", tc.Name, text.OneLine(said))
		}
		if len(args) == 0 {
			return tc.Name + "()"
		}
	}
	return tc.Name + " " + text.OneLine(string(tc.Args))
}

func (s *Session) journal(ctx context.Context, _ []string) error {
	page, err := s.Client.JournalPage(ctx, s.NPC, api.JournalQuery{Type: s.Opt.Type, Limit: s.Opt.Limit, Before: s.Opt.Before})
	if err != nil {
		return err
	}
	if s.Opt.JSON {
		return printJSON(s.Out, page)
	}
	kind := "journal entries"
	if s.Opt.Type != "" {
		kind = s.Opt.Type + " entries"
	}
	if len(page.Entries) == 0 {
		fmt.Fprintf(s.Out, "%s has no %s.\n", s.NPC, kind)
		return nil
	}
	t := s.table("id", "type", "imp", "game time", "consolidated", "content", "sources")
	width := s.rest(82)
	for _, e := range page.Entries {
		cons := ""
		if e.ConsolidatedAt != nil {
			cons = when(*e.ConsolidatedAt)
		}
		t.AppendRow(table.Row{"j:" + strconv.FormatInt(e.ID, 10), e.Type, e.Importance, when(e.GameTime), cons,
			text.ClipRunes(text.OneLine(e.Content), width), text.ClipRunes(sourcesLine(e.Sources.V), 24)})
	}
	t.Render()
	fmt.Fprintf(s.Out, "%d %s, j:%d–j:%d, oldest first.", len(page.Entries), kind, page.Entries[0].ID, page.Entries[len(page.Entries)-1].ID)
	if page.NextBefore != nil {
		fmt.Fprintf(s.Out, " Older: %s", s.again("--before", strconv.FormatInt(*page.NextBefore, 10)))
	}
	fmt.Fprintln(s.Out)
	return nil
}

func sourcesLine(src character.Sources) string {
	var parts []string
	for _, id := range src.MessageIDs {
		parts = append(parts, "m:"+strconv.FormatInt(id, 10))
	}
	for _, id := range src.JournalIDs {
		parts = append(parts, "j:"+strconv.FormatInt(id, 10))
	}
	parts = append(parts, src.EventRefs...)
	return strings.Join(parts, " ")
}

func (s *Session) profiles(ctx context.Context, _ []string) error {
	ps, err := s.Client.Profiles(ctx, s.NPC)
	if err != nil {
		return err
	}
	if s.Opt.JSON {
		return printJSON(s.Out, api.ProfilesResponse{Profiles: ps})
	}
	if len(ps) == 0 {
		fmt.Fprintf(s.Out, "%s knows no one yet.\n", s.NPC)
		return nil
	}
	t := s.table("entity", "seen", "belief", "valid", "status")
	width := s.rest(70)
	current, superseded := 0, 0
	for _, p := range ps {
		who := p.Name
		if p.Kind != "" {
			who += " (" + p.Kind + ")"
		}
		if rel := relationLine(p.Relationship.V); rel != "" {
			who += " " + rel
		}
		seen := fmt.Sprintf("%s–%s ×%d", day(p.FirstSeen), day(p.LastSeen), p.Mentions)
		if len(p.Facts) == 0 {
			desc := p.Description
			if desc == "" {
				desc = "(no beliefs yet)"
			}
			t.AppendRow(table.Row{who, seen, text.ClipRunes(text.OneLine(desc), width), "", ""})
			continue
		}
		for i, f := range p.Facts {
			status := "current"
			if f.SupersededAt != nil {
				superseded++
				status = "superseded " + day(*f.SupersededAt)
				if f.SupersededBy != nil {
					status += fmt.Sprintf(" by #%d", *f.SupersededBy)
				}
			} else {
				current++
			}
			belief := fmt.Sprintf("#%d ", f.ID)
			if f.Key != "" {
				belief += "[" + f.Key + "] "
			}
			belief += text.OneLine(f.Content)
			if i > 0 {
				who, seen = "", ""
			}
			t.AppendRow(table.Row{who, seen, text.ClipRunes(belief, width), day(f.ValidFrom), status})
		}
		t.AppendSeparator()
	}
	t.Render()
	fmt.Fprintf(s.Out, "%d profiles, %d current beliefs, %d superseded (kept: what the NPC thought before).\n", len(ps), current, superseded)
	return nil
}

func relationLine(rel map[string]float64) string {
	if len(rel) == 0 {
		return ""
	}
	keys := make([]string, 0, len(rel))
	for k := range rel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %+.2f", k, rel[k]))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// partOrder is the order of score-part columns: the blended signals first.
var partOrder = []string{journal.PartKeyword, journal.PartVector, journal.PartRecency, journal.PartImportance}

func (s *Session) memory(ctx context.Context, args []string) error {
	query := strings.Join(args, " ")
	rs, err := s.Client.Memory(ctx, s.NPC, query, s.Opt.K)
	if err != nil {
		return err
	}
	if s.Opt.JSON {
		return printJSON(s.Out, api.MemoryResponse{Results: rs})
	}
	if len(rs) == 0 {
		fmt.Fprintf(s.Out, "%s recalls nothing for %q.\n", s.NPC, query)
		return nil
	}
	seen := map[string]bool{}
	for _, r := range rs {
		for p := range r.ScoreParts {
			seen[p] = true
		}
	}
	var parts []string
	for _, p := range partOrder {
		if seen[p] {
			parts = append(parts, p)
			delete(seen, p)
		}
	}
	var others []string
	for p := range seen {
		others = append(others, p)
	}
	sort.Strings(others)
	parts = append(parts, others...)
	header := []any{"#", "ref", "score"}
	for _, p := range parts {
		header = append(header, p)
	}
	header = append(header, "content", "sources")
	t := s.table(header...)
	width := s.rest(40 + 9*len(parts) + 26)
	for i, r := range rs {
		row := table.Row{i + 1, r.Ref, fmt.Sprintf("%.3f", r.Score)}
		for _, p := range parts {
			if v, ok := r.ScoreParts[p]; ok {
				row = append(row, fmt.Sprintf("%.3f", v))
			} else {
				row = append(row, "")
			}
		}
		src := character.Sources{JournalIDs: r.Sources.JournalIDs, MessageIDs: r.Sources.MessageIDs, EventRefs: r.Sources.EventRefs}
		row = append(row, text.ClipRunes(text.OneLine(r.Content), width), text.ClipRunes(sourcesLine(src), 26))
		t.AppendRow(row)
	}
	t.Render()
	fmt.Fprintf(s.Out, "%d results for %q, best first. Read one in full: npcd aihistory %s show %s\n", len(rs), query, s.NPC, rs[0].Ref)
	return nil
}

func (s *Session) compactions(ctx context.Context, _ []string) error {
	page, err := s.Client.CompactionsPage(ctx, s.NPC, s.Opt.Limit, s.Opt.Before)
	if err != nil {
		return err
	}
	if s.Opt.JSON {
		return printJSON(s.Out, page)
	}
	if len(page.Compactions) == 0 {
		fmt.Fprintf(s.Out, "%s has never been compacted.\n", s.NPC)
		return nil
	}
	t := s.table("id", "after tick", "trigger", "tokens", "msgs", "span", "summary", "by", "at")
	counts := map[string]int{}
	for _, r := range page.Compactions {
		counts[r.Trigger]++
		by := r.Summarizer
		if r.FallbackReason != "" {
			by += " (" + text.ClipRunes(r.FallbackReason, 30) + ")"
		}
		summary := ""
		if r.SummaryMessageID > 0 {
			summary = fmt.Sprintf("m:%d", r.SummaryMessageID)
		}
		t.AppendRow(table.Row{"#" + strconv.FormatInt(r.ID, 10), r.Tick, r.Trigger,
			fmt.Sprintf("%s → %s", text.Thousands(r.TokensBefore), text.Thousands(r.TokensAfter)), r.MessagesCompacted,
			fmt.Sprintf("m:%d–m:%d", r.FirstMessageID, r.LastMessageID), summary, by, when(r.CreatedAt)})
	}
	t.Render()
	fmt.Fprintf(s.Out, "%d compactions (%s). What one lost: npcd aihistory %s diff %d.", len(page.Compactions), text.Counts(counts),
		s.NPC, page.Compactions[len(page.Compactions)-1].ID)
	if page.NextBefore != nil {
		fmt.Fprintf(s.Out, " Older: %s", s.again("--before", strconv.FormatInt(*page.NextBefore, 10)))
	}
	fmt.Fprintln(s.Out)
	return nil
}

func (s *Session) diff(ctx context.Context, args []string) error {
	id, err := positiveArg("compaction id", strings.TrimPrefix(args[0], "#"))
	if err != nil {
		return err
	}
	d, err := s.Client.Diff(ctx, s.NPC, id)
	if err != nil {
		return err
	}
	if s.Opt.JSON {
		return printJSON(s.Out, d)
	}
	w, r := s.Out, d.Compaction
	fmt.Fprintf(w, "Compaction #%d (%s, after tick %d, %s): %d messages m:%d–m:%d archived, context %s → %s tokens, summary by %s\n\n",
		r.ID, r.Trigger, r.Tick, when(r.CreatedAt), r.MessagesCompacted, r.FirstMessageID, r.LastMessageID,
		text.Thousands(r.TokensBefore), text.Thousands(r.TokensAfter), r.Summarizer)
	if d.Summary != nil {
		fmt.Fprintf(w, "SUMMARY it wrote (m:%d, %s tokens)\n", d.Summary.ID, text.Thousands(d.Summary.Tokens))
		block(w, summaryText(d.Summary.Content), "  ")
	} else {
		fmt.Fprintln(w, "It wrote no summary (a clear archives without summarizing).")
	}
	fmt.Fprintf(w, "\nREPLACED (%d messages)\n", len(d.Replaced))
	t := s.table("id", "role", "content")
	width := s.rest(30)
	for _, m := range d.Replaced {
		role := m.Role
		if m.Summary {
			role = "summary"
		}
		t.AppendRow(table.Row{"m:" + strconv.FormatInt(m.ID, 10), role, text.ClipRunes(messageLine(&m, nil), width)})
	}
	t.Render()
	fmt.Fprintf(w, "\nLOST (%d): in the replaced messages, but in neither the summary nor any memory, journal entry, profile or the persona\n", len(d.Lost))
	if len(d.Lost) > 0 {
		t := s.table("detail", "kind", "in messages")
		for _, c := range d.Lost {
			t.AppendRow(table.Row{c.Text, c.Kind, text.ClipRunes(refs("m:", c.MessageIDs), s.rest(40))})
		}
		t.Render()
	} else {
		fmt.Fprintln(w, "  nothing")
	}
	fmt.Fprintf(w, "\nKEPT (%d)\n", len(d.Kept))
	if len(d.Kept) > 0 {
		t := s.table("detail", "kind", "found in")
		for _, c := range d.Kept {
			t.AppendRow(table.Row{c.Text, c.Kind, strings.Join(c.KeptIn, " ")})
		}
		t.Render()
	}
	fmt.Fprintln(w, "\nDetails are capitalized words not starting a sentence (after in/at/to/from…: places), the actors and rooms of")
	fmt.Fprintln(w, "perceived events, numbers with their unit (digits or words: 40 gold, forty silver), what someone owns (my sword),")
	fmt.Fprintln(w, "and short double-quoted strings; matched whole-word, ignoring case.")
	return nil
}

func refs(prefix string, ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = prefix + strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, " ")
}

func (s *Session) show(ctx context.Context, args []string) error {
	ref := args[0]
	kind, idText, ok := strings.Cut(ref, ":")
	if !ok {
		kind, idText = "m", ref
	}
	id, err := positiveArg("the id in "+ref, idText)
	if err != nil {
		return err
	}
	w := s.Out
	switch strings.ToLower(kind) {
	case "m", "msg", "message":
		d, err := s.Client.Message(ctx, s.NPC, id)
		if err != nil {
			return err
		}
		if s.Opt.JSON {
			return printJSON(w, d)
		}
		m := d.Message
		state := m.State
		if d.ArchivedBy != nil {
			state += fmt.Sprintf(" by compaction #%d (%s, after tick %d)", d.ArchivedBy.ID, d.ArchivedBy.Trigger, d.ArchivedBy.Tick)
		}
		fmt.Fprintf(w, "message m:%d · %s · turn %d · tick %d · %s · %s tokens\n", m.ID, m.Role, m.Turn, m.Tick, state, text.Thousands(m.Tokens))
		if m.Masked {
			kv(w, "masked", "shown to the model as a placeholder; the text below is stored whole")
		}
		if m.Offloaded {
			kv(w, "offloaded", "sent to the model as head and tail; the text below is stored whole")
		}
		kv(w, "game time", when(m.GameTime))
		kv(w, "written", when(m.CreatedAt))
		if len(m.EventRefs) > 0 {
			kv(w, "events", strings.Join(m.EventRefs, " "))
		}
		if m.ToolCallID != "" {
			kv(w, "answers", m.ToolCallID+" ("+m.ToolName+")")
		}
		for _, tc := range m.ToolCalls {
			kv(w, "calls", fmt.Sprintf("%s %s %s", tc.ID, tc.Name, string(tc.Args)))
		}
		if len(m.Metadata) > 0 {
			b, _ := json.Marshal(m.Metadata)
			kv(w, "metadata", string(b))
		}
		fmt.Fprintln(w)
		block(w, m.Content, "  ")
	case "j", "journal", "entry":
		e, err := s.Client.Entry(ctx, s.NPC, id)
		if err != nil {
			return err
		}
		if s.Opt.JSON {
			return printJSON(w, api.EntryDetail{Entry: *e})
		}
		fmt.Fprintf(w, "journal entry j:%d · %s · importance %d\n", e.ID, e.Type, e.Importance)
		kv(w, "game time", when(e.GameTime))
		kv(w, "written", when(e.CreatedAt))
		cons := "not yet"
		if e.ConsolidatedAt != nil {
			cons = when(*e.ConsolidatedAt)
		}
		kv(w, "consolidated", cons)
		if src := sourcesLine(e.Sources.V); src != "" {
			kv(w, "sources", src)
		}
		if len(e.Metadata.V) > 0 {
			b, _ := json.Marshal(e.Metadata.V)
			kv(w, "metadata", string(b))
		}
		fmt.Fprintln(w)
		block(w, e.Content, "  ")
	case "mem", "memory":
		m, err := s.Client.MemoryByID(ctx, s.NPC, id)
		if err != nil {
			return err
		}
		if s.Opt.JSON {
			return printJSON(w, api.MemoryDetail{Memory: *m})
		}
		status := "current"
		if m.SupersededAt != nil {
			status = "superseded " + when(*m.SupersededAt)
			if m.SupersededBy != nil {
				status += fmt.Sprintf(" by mem:%d", *m.SupersededBy)
			}
		}
		fmt.Fprintf(w, "memory mem:%d · importance %d · %s\n", m.ID, m.Importance, status)
		if m.Entity != "" {
			about := m.Entity
			if m.Key != "" {
				about += " (" + m.Key + ")"
			}
			kv(w, "about", about)
		}
		kv(w, "valid from", when(m.ValidFrom))
		kv(w, "game time", when(m.GameTime))
		accessed := "never recalled"
		if m.LastAccessed != nil {
			accessed = fmt.Sprintf("recalled %d times, last %s", m.AccessCount, when(*m.LastAccessed))
		}
		kv(w, "recall", accessed)
		src := character.Sources{JournalIDs: m.Sources.JournalIDs, MessageIDs: m.Sources.MessageIDs, EventRefs: m.Sources.EventRefs}
		if line := sourcesLine(src); line != "" {
			kv(w, "sources", line)
		}
		fmt.Fprintln(w)
		block(w, m.Content, "  ")
	default:
		return fmt.Errorf("aihistory show: %q is not a reference: use m:ID (message), j:ID (journal entry) or mem:ID (memory)", ref)
	}
	return nil
}

func (s *Session) asOf(ctx context.Context, args []string) error {
	tick, err := positiveArg("tick", args[0])
	if err != nil {
		return err
	}
	a, err := s.Client.AsOf(ctx, s.NPC, tick)
	if err != nil {
		return err
	}
	if s.Opt.JSON {
		return printJSON(s.Out, a)
	}
	w := s.Out
	fmt.Fprintf(w, "%s at the end of tick %d", s.NPC, a.Tick)
	if r := a.Record; r != nil {
		fmt.Fprintf(w, " (game time %s, ran %s)\n", when(r.GameTime), when(r.At))
		kv(w, "context", fmt.Sprintf("%s %.1f%% of %s tokens (%s)", bar(r.Utilization, 20), 100*r.Utilization, text.Thousands(r.Window), text.Thousands(r.ContextTokens)))
		if r.CompactionID != nil {
			kv(w, "compacted", fmt.Sprintf("compaction #%d ran inside this tick", *r.CompactionID))
		}
	} else {
		fmt.Fprintln(w, " (no tick record)")
	}
	kv(w, "live", fmt.Sprintf("%d messages%s, %s tokens unmasked; %d compactions committed by then; newest message m:%d",
		len(a.Messages), map[bool]string{true: " + summary", false: ""}[a.Summary != nil], text.Thousands(a.Tokens), a.Compactions, a.Boundary))
	if a.Approximate {
		kv(w, "note", "a clear of the context is involved; its time is inferred from the messages after it")
	}
	fmt.Fprintln(w)
	if a.Summary != nil {
		fmt.Fprintln(w, summaryTitle(a.Summary, nil))
		block(w, summaryText(a.Summary.Content), "  ")
		fmt.Fprintln(w)
	} else {
		fmt.Fprintln(w, "No [CONTEXT SUMMARY] then.")
	}
	if len(a.Messages) > 0 {
		s.messageTable(a.Messages, nil)
	}
	fmt.Fprintln(w, "State, masking and compaction ids are shown as they are now.")
	return nil
}

func (s *Session) timeline(ctx context.Context, _ []string) error {
	tl, err := s.Client.Timeline(ctx, s.NPC, api.TimelineQuery{From: s.Opt.From, To: s.Opt.To, Limit: s.Opt.Limit})
	if err != nil {
		return err
	}
	if s.Opt.Out != "" {
		if err := writeChartFile(s.Opt.Out, tl, s.Opt.Width, s.Opt.Height); err != nil {
			return err
		}
		if s.Opt.JSON {
			return printJSON(s.Out, tl)
		}
		fmt.Fprintf(s.Out, "wrote %s: %d ticks, %d compactions (%s)\n", s.Opt.Out, len(tl.Points), len(tl.Compactions), markerCounts(tl))
		return nil
	}
	if s.Opt.JSON {
		return printJSON(s.Out, tl)
	}
	chartText(s.Out, tl, s.Opt.Width, s.Opt.Height, s.Cols)
	return nil
}

func markerCounts(tl *api.TimelineResponse) string {
	counts := map[string]int{}
	for _, m := range tl.Compactions {
		counts[m.Trigger]++
	}
	if len(counts) == 0 {
		return "none"
	}
	return text.Counts(counts)
}

// Rendering helpers.

func (s *Session) table(header ...any) table.Writer {
	t := table.NewWriter()
	t.SetOutputMirror(s.Out)
	t.SetStyle(table.StyleLight)
	t.AppendHeader(table.Row(header))
	return t
}

// rest is the width left for a free-text column when the others take used.
func (s *Session) rest(used int) int { return max(30, s.Cols-used) }

func kv(w io.Writer, key, value string) {
	fmt.Fprintf(w, "%-12s %s\n", strings.ToUpper(key), value)
}

func block(w io.Writer, text, indent string) {
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintln(w, indent+l)
	}
}

func bar(f float64, n int) string {
	full := int(f*float64(n) + 0.5)
	full = max(0, min(n, full))
	return strings.Repeat("█", full) + strings.Repeat("░", n-full)
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func day(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02")
}

func metaInt(meta map[string]any, key string) (int64, bool) {
	switch v := meta[key].(type) {
	case float64:
		return int64(v), true
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	}
	return 0, false
}

func positiveArg(what, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("aihistory: %s must be a positive integer, got %q", what, s)
	}
	return n, nil
}
