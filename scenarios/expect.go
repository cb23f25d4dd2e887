package scenarios

import (
	"encoding/json"
	"fmt"
	"github.com/npcd/npcd/internal/text"
	"math"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/tick"
)

// outcome is the verdict on one expectation.
type outcome struct {
	ok              bool
	expected, found string
}

// check evaluates e and records a failure. An error is a store that could
// not be read, not a failed expectation.
func (r *runner) check(e *Expect, vars map[string]string, label, stepName string) error {
	out, err := r.evaluate(e, vars)
	if err != nil {
		return fmt.Errorf("line %d, %s: %w", e.Line, e.Kind, err)
	}
	r.rep.Checks++
	if out.ok {
		return nil
	}
	r.rep.Failed++
	if len(r.rep.Failures) < MaxListedFailures {
		r.rep.Failures = append(r.rep.Failures, Failure{Step: label, StepName: stepName, Line: e.Line, Expect: e.Kind,
			Expected: out.expected, Found: out.found})
	}
	return nil
}

func (r *runner) evaluate(e *Expect, vars map[string]string) (outcome, error) {
	t := textTest{contains: e.Contains.render(vars), re: e.Matches}
	switch e.Kind {
	case ExpectAction:
		return r.expectAction(e, t), nil
	case ExpectJournal:
		return r.expectJournal(e, t, vars)
	case ExpectMemorySearch:
		return r.expectSearch(e, t, vars)
	case ExpectMemories:
		return r.expectMemories(e, t, vars)
	case ExpectProfile:
		return r.expectProfile(e, vars)
	case ExpectSummary:
		return r.expectSummary(e, t, vars)
	case ExpectUtilization:
		return r.expectUtilization(e)
	case ExpectCompactions:
		return r.expectCompactions(e)
	case ExpectMasked:
		return r.expectMasked(e)
	case ExpectNoMessageLost:
		return r.expectNoLoss()
	case ExpectWarning:
		return r.expectWarning(e, t)
	case ExpectPersona:
		return r.expectPersona()
	case ExpectAwaiting:
		return r.expectAwaiting(e)
	case ExpectSleeps:
		return r.expectSleeps(e), nil
	}
	return outcome{}, fmt.Errorf("unknown expectation %q", e.Kind)
}

// textTest is a contains (case-insensitive) and/or regular expression test.
type textTest struct {
	contains string
	re       *regexp.Regexp
}

func (t textTest) empty() bool { return t.contains == "" && t.re == nil }

func (t textTest) match(s string) bool {
	if t.contains != "" && !strings.Contains(strings.ToLower(s), strings.ToLower(t.contains)) {
		return false
	}
	return t.re == nil || t.re.MatchString(s)
}

func (t textTest) String() string {
	var parts []string
	if t.contains != "" {
		parts = append(parts, fmt.Sprintf("containing %q", t.contains))
	}
	if t.re != nil {
		parts = append(parts, fmt.Sprintf("matching /%s/", t.re))
	}
	return strings.Join(parts, " and ")
}

// judge applies the rules every list expectation shares to items (already
// filtered by kind): with each_with, every item mentioning it must pass;
// with not, none may pass; otherwise the number that pass must be within
// the count. what names the items ("journal entries"), wanted the test.
func judge(e *Expect, items []string, pass func(string) bool, eachWith, what, wanted string) outcome {
	var passed, failed []string
	for _, it := range items {
		if eachWith != "" {
			if !strings.Contains(strings.ToLower(it), strings.ToLower(eachWith)) {
				continue
			}
			if !pass(it) {
				failed = append(failed, it)
			}
			continue
		}
		if pass(it) {
			passed = append(passed, it)
		}
	}
	switch {
	case eachWith != "":
		return outcome{ok: len(failed) == 0,
			expected: fmt.Sprintf("every one of the %s mentioning %q %s", what, eachWith, wanted),
			found:    fmt.Sprintf("%d that do not: %s", len(failed), sample(failed))}
	case e.Not:
		return outcome{ok: len(passed) == 0,
			expected: fmt.Sprintf("none of the %s %s", what, wanted),
			found:    fmt.Sprintf("%d that do: %s", len(passed), sample(passed))}
	}
	found := fmt.Sprintf("%d of %d %s: %s", len(passed), len(items), what, sample(passed))
	if len(passed) == 0 {
		found = fmt.Sprintf("none of %d %s; the latest: %s", len(items), what, sample(latest(items, 3)))
	}
	return outcome{ok: e.Count.ok(len(passed)), expected: fmt.Sprintf("%s %s %s", countPhrase(e.Count), what, wanted), found: found}
}

func countPhrase(c Count) string {
	switch {
	case c.Min == c.Max:
		return fmt.Sprintf("exactly %d", c.Min)
	case c.Max < 0:
		return fmt.Sprintf("at least %d", c.Min)
	case c.Min == 0:
		return fmt.Sprintf("at most %d", c.Max)
	}
	return fmt.Sprintf("between %d and %d", c.Min, c.Max)
}

func latest(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return items[len(items)-n:]
}

// sample shows up to three items, each cut short.
func sample(items []string) string {
	if len(items) == 0 {
		return "(nothing)"
	}
	var parts []string
	for i, it := range items {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("… and %d more", len(items)-3))
			break
		}
		parts = append(parts, fmt.Sprintf("%q", text.Clip(text.OneLine(it), 160)))
	}
	return strings.Join(parts, "; ")
}

func orAnything(t textTest) string {
	if t.empty() {
		return "at all"
	}
	return t.String()
}

func actionText(a tick.Action) string {
	if s, ok := a.Args["text"].(string); ok && len(a.Args) == 1 {
		return a.Tool + ": " + s
	}
	b, _ := json.Marshal(a.Args)
	return a.Tool + ": " + string(b)
}

func (r *runner) expectAction(e *Expect, t textTest) outcome {
	var items []string
	for _, a := range r.actions {
		if e.Tool == "" || a.Tool == e.Tool {
			items = append(items, actionText(a))
		}
	}
	what := "actions"
	if e.Tool != "" {
		what = e.Tool + " actions"
	}
	out := judge(e, items, func(s string) bool {
		_, text, _ := strings.Cut(s, ": ")
		return t.match(text)
	}, "", what, orAnything(t))
	if len(r.actions) > 0 && len(items) == 0 {
		all := make([]string, len(r.actions))
		for i, a := range r.actions {
			all[i] = actionText(a)
		}
		out.found += "; other actions: " + sample(all)
	}
	return out
}

func (r *runner) expectJournal(e *Expect, t textTest, vars map[string]string) (outcome, error) {
	es, err := r.env.Journal.List(r.ctx, r.id, journal.ListQuery{Type: e.Type})
	if err != nil {
		return outcome{}, err
	}
	items := make([]string, len(es))
	for i, en := range es {
		items[i] = en.Content
	}
	what := "journal entries"
	if e.Type != "" {
		what = e.Type + " entries"
	}
	return judge(e, items, t.match, e.EachWith.render(vars), what, orAnything(t)), nil
}

func (r *runner) expectSearch(e *Expect, t textTest, vars map[string]string) (outcome, error) {
	k := e.K
	if k == 0 {
		k = 5
	}
	q := e.Query.render(vars)
	rs, err := r.env.Memory.Search(r.ctx, r.id, q, k)
	if err != nil {
		return outcome{}, err
	}
	items := make([]string, len(rs))
	for i, res := range rs {
		items[i] = res.Content
	}
	out := judge(e, items, t.match, "", fmt.Sprintf("top %d results for %q", k, q), t.String())
	if !e.Not {
		out.expected = fmt.Sprintf("a result %s within the top %d for %q", t, k, q)
		if len(rs) > 0 && !out.ok {
			out.found = fmt.Sprintf("%d results, none %s: %s", len(rs), t, sample(items))
		}
	}
	return out, nil
}

func (r *runner) expectMemories(e *Expect, t textTest, vars map[string]string) (outcome, error) {
	ms, err := r.env.Journal.Memories(r.ctx, r.id, journal.MemoryQuery{})
	if err != nil {
		return outcome{}, err
	}
	items := make([]string, len(ms))
	for i, m := range ms {
		items[i] = m.Content
	}
	return judge(e, items, t.match, e.EachWith.render(vars), "current memories", orAnything(t)), nil
}

func (r *runner) expectProfile(e *Expect, vars map[string]string) (outcome, error) {
	entity := e.Entity.render(vars)
	ps, err := r.env.Characters.Profiles(r.ctx, r.id, entity)
	if err != nil {
		return outcome{}, err
	}
	var p *character.Profile
	if len(ps) > 0 {
		p = &ps[0]
	}
	fact := textTest{contains: e.Fact.render(vars), re: e.Matches}
	desc := e.Description.render(vars)
	none := "no profile"
	if p != nil {
		none = "a profile: " + describeProfile(p)
	}
	switch {
	case desc != "":
		has := p != nil && strings.Contains(strings.ToLower(p.Description), strings.ToLower(desc))
		exp := fmt.Sprintf("the profile of %q to describe %q", entity, desc)
		if e.Not {
			exp = fmt.Sprintf("the profile of %q not to describe %q", entity, desc)
		}
		return outcome{ok: has != e.Not, expected: exp, found: none}, nil
	case fact.empty() && e.Source == "" && e.EachWith.IsZero():
		exp := fmt.Sprintf("a profile of %q", entity)
		if e.Not {
			exp = fmt.Sprintf("no profile of %q", entity)
		}
		return outcome{ok: (p != nil) != e.Not, expected: exp, found: none}, nil
	}
	var items []string
	byText := map[string]character.Fact{}
	if p != nil {
		for _, f := range p.Facts {
			items = append(items, f.Content)
			byText[f.Content] = f
		}
	}
	pass := func(s string) bool {
		return fact.match(s) && (e.Source == "" || citesRef(byText[s], e.Source))
	}
	var wanted []string
	if !fact.empty() {
		wanted = append(wanted, fact.String())
	}
	if e.Source != "" {
		wanted = append(wanted, fmt.Sprintf("citing event %q", e.Source))
	}
	return judge(e, items, pass, e.EachWith.render(vars), fmt.Sprintf("current facts about %q", entity), strings.Join(wanted, " and ")), nil
}

func citesRef(f character.Fact, pattern string) bool {
	for _, ref := range f.Sources.V.EventRefs {
		if ok, _ := path.Match(pattern, ref); ok {
			return true
		}
	}
	return false
}

func describeProfile(p *character.Profile) string {
	s := p.Name
	if p.Description != "" {
		s += ": " + text.Clip(p.Description, 100)
	}
	var fs []string
	for _, f := range p.Facts {
		fs = append(fs, f.Content)
	}
	if len(fs) > 0 {
		s += "; facts: " + sample(fs)
	}
	return s
}

// summary returns the live [CONTEXT SUMMARY], or nil.
func (r *runner) summary() (*character.Message, error) {
	live, err := r.env.Characters.History(r.ctx, r.id, character.HistoryQuery{State: character.StateLive})
	if err != nil {
		return nil, err
	}
	for i := range live {
		if live[i].Summary {
			return &live[i], nil
		}
	}
	return nil, nil
}

func (r *runner) expectSummary(e *Expect, t textTest, vars map[string]string) (outcome, error) {
	s, err := r.summary()
	if err != nil {
		return outcome{}, err
	}
	if t.empty() && e.EachWith.IsZero() {
		if e.Not {
			return outcome{ok: s == nil, expected: "no [CONTEXT SUMMARY]", found: "a summary"}, nil
		}
		return outcome{ok: s != nil, expected: "a [CONTEXT SUMMARY]", found: "none: the NPC was never compacted"}, nil
	}
	var lines []string
	if s != nil {
		for _, l := range strings.Split(s.Content, "\n") {
			if strings.TrimSpace(l) != "" && strings.TrimSpace(l) != character.SummaryPrefix {
				lines = append(lines, l)
			}
		}
	}
	out := judge(e, lines, t.match, e.EachWith.render(vars), "summary lines", t.String())
	if s == nil && !out.ok {
		out.found = "no summary: the NPC was never compacted"
	}
	return out, nil
}

func (r *runner) expectUtilization(e *Expect) (outcome, error) {
	c, err := r.env.Characters.Get(r.ctx, r.id)
	if err != nil {
		return outcome{}, err
	}
	u := c.Utilization()
	ok := (math.IsNaN(e.Below) || u < e.Below) && (math.IsNaN(e.Above) || u > e.Above)
	var want []string
	if !math.IsNaN(e.Above) {
		want = append(want, fmt.Sprintf("above %.3f", e.Above))
	}
	if !math.IsNaN(e.Below) {
		want = append(want, fmt.Sprintf("below %.3f", e.Below))
	}
	return outcome{ok: ok, expected: "utilization " + strings.Join(want, " and "),
		found: fmt.Sprintf("%.3f (%d of %d tokens)", u, c.ContextTokens(), c.ContextWindow)}, nil
}

func (r *runner) expectCompactions(e *Expect) (outcome, error) {
	recs, err := r.env.Compactions.Records(r.ctx, r.id)
	if err != nil {
		return outcome{}, err
	}
	n := 0
	by := map[string]int{}
	for _, rec := range recs {
		by[rec.Trigger]++
		if e.Trigger == "" || rec.Trigger == e.Trigger {
			n++
		}
	}
	what := "compactions"
	if e.Trigger != "" {
		what = e.Trigger + " compactions"
	}
	return outcome{ok: e.Count.ok(n), expected: fmt.Sprintf("%s %s", countPhrase(e.Count), what), found: fmt.Sprintf("%d (%s)", n, compactionCounts(by, "none at all"))}, nil
}

func (r *runner) expectMasked(e *Expect) (outcome, error) {
	all, err := r.env.Characters.History(r.ctx, r.id, character.HistoryQuery{})
	if err != nil {
		return outcome{}, err
	}
	n, results := 0, 0
	for _, m := range all {
		if m.Role == "tool" {
			results++
		}
		if m.Masked {
			n++
		}
	}
	return outcome{ok: e.Count.ok(n), expected: fmt.Sprintf("%s masked tool results", countPhrase(e.Count)),
		found: fmt.Sprintf("%d masked of %d tool results", n, results)}, nil
}

func (r *runner) expectWarning(e *Expect, t textTest) (outcome, error) {
	c, err := r.env.Characters.Get(r.ctx, r.id)
	if err != nil {
		return outcome{}, err
	}
	return judge(e, tick.Warnings(c), t.match, "", "warnings", orAnything(t)), nil
}

func (r *runner) expectPersona() (outcome, error) {
	c, err := r.env.Characters.Get(r.ctx, r.id)
	if err != nil {
		return outcome{}, err
	}
	want := r.sc.NPC
	ok := c.Name == want.Name && c.Persona == want.Persona
	return outcome{ok: ok, expected: fmt.Sprintf("name %q and the persona of the file", want.Name),
		found: fmt.Sprintf("name %q, persona %q", c.Name, text.Clip(c.Persona, 120))}, nil
}

func (r *runner) expectAwaiting(e *Expect) (outcome, error) {
	c, err := r.env.Characters.Get(r.ctx, r.id)
	if err != nil {
		return outcome{}, err
	}
	n := 0
	for _, pc := range c.State.Awaiting.V {
		if e.Tool == "" || pc.Tool == e.Tool {
			n++
		}
	}
	what := "a call"
	if e.Tool != "" {
		what = "a call of " + e.Tool
	}
	if e.Not {
		return outcome{ok: n == 0, expected: "no " + strings.TrimPrefix(what, "a ") + " awaited", found: describeAwaiting(c.State.Awaiting.V)}, nil
	}
	return outcome{ok: n > 0, expected: what + " awaiting its result", found: describeAwaiting(c.State.Awaiting.V)}, nil
}

func (r *runner) expectSleeps(e *Expect) outcome {
	n, what := r.rep.Sleeps, "sleeps"
	if e.Scheduled != nil {
		if *e.Scheduled {
			n, what = r.rep.ScheduledSleeps, "scheduled sleeps"
		} else {
			n, what = r.rep.Sleeps-r.rep.ScheduledSleeps, "game-driven sleeps"
		}
	}
	return outcome{ok: e.Count.ok(n), expected: fmt.Sprintf("%s %s that did something", countPhrase(e.Count), what),
		found: fmt.Sprintf("%d (%d scheduled of %d in all)", n, r.rep.ScheduledSleeps, r.rep.Sleeps)}
}

// expectNoLoss checks that every message ever written is still stored,
// live or archived: the running totals equal a recount of the rows; rows
// seen by the previous check are all still there; every event the scenario
// posted and a tick consumed is in the message that consumed it; every
// action the ticks returned is in an assistant message; every tool result
// the scenario posted is stored.
func (r *runner) expectNoLoss() (outcome, error) {
	ctx := r.ctx
	c, err := r.env.Characters.Get(ctx, r.id)
	if err != nil {
		return outcome{}, err
	}
	all, err := r.env.Characters.History(ctx, r.id, character.HistoryQuery{})
	if err != nil {
		return outcome{}, err
	}
	t, err := r.env.Characters.Recount(ctx, r.id)
	if err != nil {
		return outcome{}, err
	}
	var problems []string
	byID := make(map[int64]*character.Message, len(all))
	calls, results := map[string]bool{}, map[string]bool{}
	var live, archived, summaries, kept int
	var maxID int64
	for i := range all {
		m := &all[i]
		byID[m.ID] = m
		maxID = max(maxID, m.ID)
		if m.ID <= r.kept.maxID {
			kept++
		}
		switch {
		case m.State == character.StateArchived:
			archived++
		case m.State != character.StateLive:
			problems = append(problems, fmt.Sprintf("message %d is in state %q", m.ID, m.State))
		case m.Summary:
			summaries++
		default:
			live++
		}
		for _, tc := range m.ToolCalls.V {
			calls[tc.ID] = true
		}
		if m.Role == "tool" {
			results[m.ToolCallID] = true
		}
	}
	if summaries > 1 {
		problems = append(problems, fmt.Sprintf("%d live summaries", summaries))
	}
	if kept < r.kept.rows {
		problems = append(problems, fmt.Sprintf("%d of the %d messages stored at the previous check are gone", r.kept.rows-kept, r.kept.rows))
	}
	st := c.State
	if live != st.LiveMessages || archived != st.ArchivedMessages {
		problems = append(problems, fmt.Sprintf("the NPC counts %d live and %d archived messages, the rows are %d and %d", st.LiveMessages, st.ArchivedMessages, live, archived))
	}
	if t.LiveTokens != st.LiveTokens || t.SummaryTokens != st.SummaryTokens || t.LiveMessages != st.LiveMessages || t.ArchivedMessages != st.ArchivedMessages {
		problems = append(problems, fmt.Sprintf("running totals %d/%d tokens (live/summary) differ from a recount %d/%d", st.LiveTokens, st.SummaryTokens, t.LiveTokens, t.SummaryTokens))
	}
	for start := 0; start < len(r.refs); start += 500 {
		refs := r.refs[start:min(start+500, len(r.refs))]
		evs, err := r.env.Characters.EventsByRef(ctx, r.id, refs)
		if err != nil {
			return outcome{}, err
		}
		found := map[string]bool{}
		for _, ev := range evs {
			if ev.Ref == nil {
				continue
			}
			found[*ev.Ref] = true
			if ev.MessageID == nil {
				continue // still pending: not lost, not yet perceived
			}
			m, ok := byID[*ev.MessageID]
			if !ok {
				problems = append(problems, fmt.Sprintf("event %q was consumed into message %d, which is gone", *ev.Ref, *ev.MessageID))
				continue
			}
			if !slices.Contains(m.EventRefs.V, *ev.Ref) {
				problems = append(problems, fmt.Sprintf("message %d does not cite event %q it consumed", m.ID, *ev.Ref))
			}
		}
		for _, ref := range refs {
			if !found[ref] {
				problems = append(problems, fmt.Sprintf("event %q was accepted but is not stored", ref))
			}
		}
	}
	var ids []string
	for id := range r.calls {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if !calls[id] {
			problems = append(problems, fmt.Sprintf("the call %q of an action is in no stored message", id))
		}
	}
	for _, id := range r.answered {
		if !results[id] {
			problems = append(problems, fmt.Sprintf("the posted result of call %q is not stored", id))
		}
	}
	r.kept.maxID, r.kept.rows = maxID, len(all)
	return outcome{ok: len(problems) == 0,
		expected: fmt.Sprintf("every message written still stored, live or archived, with totals that match (%d events, %d actions, %d results posted)", len(r.refs), len(r.calls), len(r.answered)),
		found:    fmt.Sprintf("%d live + %d archived + %d summary; %s", live, archived, summaries, problemList(problems))}, nil
}

func problemList(ps []string) string {
	if len(ps) == 0 {
		return "nothing missing"
	}
	if len(ps) > 5 {
		return strings.Join(ps[:5], "; ") + fmt.Sprintf("; … and %d more", len(ps)-5)
	}
	return strings.Join(ps, "; ")
}
