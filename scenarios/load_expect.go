package scenarios

import (
	"math"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
)

var countFields = []string{"at_least", "at_most", "exactly"}

// expectFields lists the fields of each expectation kind that takes a
// mapping; no_message_lost and persona take a single value.
var expectFields = map[string][]string{
	ExpectAction:       append([]string{"tool", "contains", "matches", "not"}, countFields...),
	ExpectJournal:      append([]string{"type", "contains", "matches", "each_with", "not"}, countFields...),
	ExpectMemorySearch: {"query", "contains", "matches", "k", "not"},
	ExpectMemories:     append([]string{"contains", "matches", "each_with", "not"}, countFields...),
	ExpectProfile:      {"entity", "fact", "matches", "description", "source", "each_with", "not"},
	ExpectSummary:      {"contains", "matches", "each_with", "not"},
	ExpectUtilization:  {"below", "above"},
	ExpectCompactions:  append([]string{"trigger"}, countFields...),
	ExpectMasked:       countFields,
	ExpectWarning:      {"contains", "matches", "not"},
	ExpectAwaiting:     {"tool", "not"},
	ExpectSleeps:       append([]string{"scheduled"}, countFields...),
}

func expectKinds() []string {
	ks := []string{ExpectNoMessageLost, ExpectPersona}
	for k := range expectFields {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (l *loader) expects(n *yaml.Node, field string, sc scope) []Expect {
	items, ok := l.list(n, field)
	if !ok {
		return nil
	}
	var out []Expect
	for i, it := range items {
		f := index(field, i)
		o, ok := l.object(it, f, nil)
		if !ok {
			continue
		}
		if len(o.keys) != 1 {
			l.errorf(o.node, f, "an expectation is one of: %s (one per list item)", strings.Join(expectKinds(), ", "))
			continue
		}
		kind := o.keys[0]
		v, kf, _ := o.get(kind)
		e := Expect{Line: o.knode[kind].Line, Kind: kind, Below: math.NaN(), Above: math.NaN(), Count: Count{Min: 1, Max: -1}}
		switch kind {
		case ExpectNoMessageLost:
			if b, ok := l.boolean(v, kf); ok && !b {
				l.errorf(resolve(v), kf, "write no_message_lost: true (there is no false form)")
			}
		case ExpectPersona:
			if s, ok := l.str(v, kf); ok && s != "unchanged" {
				l.errorf(resolve(v), kf, "write persona: unchanged, not %q", s)
			}
		default:
			known, ok := expectFields[kind]
			if !ok {
				l.errorf(o.knode[kind], kf, "unknown expectation (known: %s)", strings.Join(expectKinds(), ", "))
				continue
			}
			if resolve(v).Tag == "!!null" { // "masked:" alone: the defaults
				break
			}
			eo, ok := l.object(v, kf, known)
			if !ok {
				continue
			}
			l.expectFields(&e, eo, sc)
		}
		out = append(out, e)
	}
	return out
}

func (l *loader) expectFields(e *Expect, o *object, sc scope) {
	f := o.field
	text := func(key string, dst *Text) {
		if v, fv, ok := o.get(key); ok {
			*dst, _ = l.text(v, fv, sc)
		}
	}
	text("contains", &e.Contains)
	text("each_with", &e.EachWith)
	text("query", &e.Query)
	text("entity", &e.Entity)
	text("fact", &e.Fact)
	text("description", &e.Description)
	if v, fv, ok := o.get("matches"); ok {
		e.Matches, _ = l.regex(v, fv)
	}
	if v, fv, ok := o.get("not"); ok {
		e.Not, _ = l.boolean(v, fv)
	}
	if v, fv, ok := o.get("k"); ok {
		e.K, _ = l.integer(v, fv, 1, journal.MaxK)
	}
	if v, fv, ok := o.get("tool"); ok {
		e.Tool, _ = l.word(v, fv)
		l.needTool(resolve(v), fv, e.Tool)
	}
	if v, fv, ok := o.get("type"); ok {
		if e.Type, ok = l.word(v, fv); ok && !journal.ValidType(e.Type) {
			l.errorf(resolve(v), fv, "%q is not a journal type (%s)", e.Type, strings.Join(journal.Types, ", "))
		}
	}
	if v, fv, ok := o.get("trigger"); ok {
		if e.Trigger, ok = l.word(v, fv); ok && !slices.Contains(sleep.Triggers, e.Trigger) {
			l.errorf(resolve(v), fv, "%q is not a compaction trigger (%s)", e.Trigger, strings.Join(sleep.Triggers, ", "))
		}
	}
	if v, fv, ok := o.get("source"); ok {
		if e.Source, ok = l.word(v, fv); ok {
			if _, err := path.Match(e.Source, ""); err != nil {
				l.errorf(resolve(v), fv, "%q is not a pattern (use * and ?)", e.Source)
			}
		}
	}
	if v, fv, ok := o.get("scheduled"); ok {
		b, _ := l.boolean(v, fv)
		e.Scheduled = &b
	}
	for key, dst := range map[string]*float64{"below": &e.Below, "above": &e.Above} {
		if v, fv, ok := o.get(key); ok {
			if x, ok := l.number(v, fv); ok {
				*dst = x
			}
		}
	}
	l.expectCount(e, o)

	// What each kind needs.
	needText := func(keys ...string) {
		for _, k := range keys {
			if o.has(k) {
				return
			}
		}
		l.errorf(o.node, f, "needs %s", strings.Join(keys, " or "))
	}
	switch e.Kind {
	case ExpectMemorySearch:
		if !o.has("query") {
			l.errorf(o.node, join(f, "query"), "is required (what to search for)")
		}
		needText("contains", "matches")
	case ExpectProfile:
		if !o.has("entity") {
			l.errorf(o.node, join(f, "entity"), "is required (whose profile)")
		}
		if o.has("each_with") {
			needText("fact", "matches", "source")
		}
		if o.has("description") && (o.has("fact") || o.has("matches") || o.has("source") || o.has("each_with")) {
			l.errorf(o.node, f, "description is checked on its own: write a second profile expectation for facts")
		}
	case ExpectUtilization:
		needText("below", "above")
		for _, k := range []string{"below", "above"} {
			if x := map[string]float64{"below": e.Below, "above": e.Above}[k]; !math.IsNaN(x) && (x < 0 || x > 1) {
				v, fv, _ := o.get(k)
				l.errorf(resolve(v), fv, "is a share of the window, between 0 and 1")
			}
		}
	case ExpectJournal, ExpectMemories, ExpectSummary:
		if o.has("each_with") {
			needText("contains", "matches")
		}
	}
	if o.has("each_with") && e.Not {
		l.errorf(o.node, f, "each_with and not do not go together (each_with already says what every item must be)")
	}
}

// expectCount reads at_least, at_most and exactly.
func (l *loader) expectCount(e *Expect, o *object) {
	var set []string
	for _, k := range countFields {
		v, fv, ok := o.get(k)
		if !ok {
			continue
		}
		set = append(set, k)
		n, ok := l.integer(v, fv, 0, math.MaxInt32)
		if !ok {
			continue
		}
		switch k {
		case "at_least":
			e.Count.Min = n
		case "at_most":
			e.Count.Max = n
			if !o.has("at_least") {
				e.Count.Min = 0
			}
		case "exactly":
			e.Count = Count{Min: n, Max: n}
		}
	}
	switch {
	case slices.Contains(set, "exactly") && len(set) > 1:
		l.errorf(o.node, o.field, "exactly does not go with at_least or at_most")
	case len(set) > 0 && e.Not:
		l.errorf(o.node, o.field, "not does not go with a count (write exactly: 0)")
	case len(set) > 0 && o.has("each_with"):
		l.errorf(o.node, o.field, "each_with does not go with a count")
	case e.Count.Max >= 0 && e.Count.Min > e.Count.Max:
		l.errorf(o.node, o.field, "at_least %d is more than at_most %d", e.Count.Min, e.Count.Max)
	}
}
