package scenarios

import (
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

var stepKinds = []string{"event", "events", "tick", "tool_results", "advance", "sleep", "compact", "repeat"}

func (l *loader) steps(items []*yaml.Node, field string, sc scope) []Step {
	out := make([]Step, 0, len(items))
	for i, it := range items {
		if st, ok := l.step(it, index(field, i), sc); ok {
			out = append(out, st)
		}
	}
	return out
}

// bareSteps are the steps that may be written as a single word: "- sleep"
// for "- sleep: true".
var bareSteps = []string{"sleep", "compact", "tick"}

func (l *loader) step(n *yaml.Node, field string, sc scope) (Step, bool) {
	if rv := resolve(n); isScalar(rv) && slices.Contains(bareSteps, rv.Value) {
		n = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: rv.Line, Column: rv.Column, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: rv.Value, Line: rv.Line, Column: rv.Column},
			{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true", Line: rv.Line, Column: rv.Column},
		}}
	}
	o, ok := l.object(n, field, nil)
	if !ok {
		return Step{}, false
	}
	st := Step{Line: o.node.Line}
	var kinds []string
	unknown := false
	for _, k := range o.keys {
		switch {
		case k == "name" || k == "expect":
		case slices.Contains(stepKinds, k):
			kinds = append(kinds, k)
		default:
			unknown = true
			l.errorf(o.knode[k], join(field, k), "unknown step kind (a step is one of: %s; with name and expect)", strings.Join(stepKinds, ", "))
		}
	}
	switch {
	case len(kinds) == 0 && unknown:
		return st, false
	case len(kinds) == 0 && o.has("expect"):
		st.Kind = StepExpect
	case len(kinds) == 0:
		l.errorf(o.node, field, "a step needs one of: %s (or only expect)", strings.Join(stepKinds, ", "))
		return st, false
	case len(kinds) == 1:
		st.Kind = kinds[0]
	case len(kinds) == 2 && slices.Contains(kinds, "tick") && (slices.Contains(kinds, "event") || slices.Contains(kinds, "events") || slices.Contains(kinds, "tool_results")):
		st.Kind = kinds[0]
		if st.Kind == "tick" {
			st.Kind = kinds[1]
		}
	default:
		l.errorf(o.node, field, "a step does one thing, not %s (only tick may go with event, events or tool_results)", strings.Join(kinds, " and "))
		return st, false
	}
	if v, f, ok := o.get("name"); ok {
		st.Name, _ = l.str(v, f)
	}
	if v, f, ok := o.get("tick"); ok {
		st.Tick = l.tickMode(v, f)
	}
	switch st.Kind {
	case "event":
		v, f, _ := o.get("event")
		if ev, ok := l.event(v, f, sc); ok {
			st.Events = []Event{ev}
		}
		st.Kind = StepEvents
	case StepEvents:
		v, f, _ := o.get("events")
		items, ok := l.list(v, f)
		if ok && len(items) == 0 {
			l.errorf(resolve(v), f, "must hold at least one event")
		}
		for i, it := range items {
			if ev, ok := l.event(it, index(f, i), sc); ok {
				st.Events = append(st.Events, ev)
			}
		}
	case StepToolResults:
		v, f, _ := o.get("tool_results")
		st.Results = l.toolResults(v, f, sc)
	case StepAdvance:
		v, f, _ := o.get("advance")
		st.Advance, _ = l.duration(v, f)
	case StepSleep:
		v, f, _ := o.get("sleep")
		if rv := resolve(v); !(rv.Tag == "!!null" || rv.Tag == "!!bool" && rv.Value == "true" || rv.Kind == yaml.MappingNode && len(rv.Content) == 0) {
			l.errorf(rv, f, "write sleep: true (the NPC goes to bed now), not %s", describe(rv))
		}
	case StepCompact:
		v, f, _ := o.get("compact")
		st.Instruction = l.compact(v, f, sc)
	case StepRepeat:
		v, f, _ := o.get("repeat")
		st.Repeat = l.repeat(v, f, sc)
	}
	if v, f, ok := o.get("expect"); ok {
		st.Expect = l.expects(v, f, sc)
	}
	return st, true
}

func (l *loader) tickMode(n *yaml.Node, field string) TickMode {
	rv := resolve(n)
	switch {
	case isScalar(rv) && rv.Tag == "!!int":
		c, _ := l.integer(rv, field, 1, MaxTicksInStep)
		return TickMode{Count: c}
	case isScalar(rv) && rv.Value == "once", rv.Tag == "!!bool" && rv.Value == "true":
		return TickMode{Count: 1}
	case isScalar(rv) && rv.Value == "until_idle":
		return TickMode{UntilIdle: true}
	}
	l.errorf(rv, field, "must be once, until_idle or a number of ticks, not %s", describe(rv))
	return TickMode{}
}

var eventFields = []string{"id", "kind", "actor", "target", "text", "room", "at"}

func (l *loader) event(n *yaml.Node, field string, sc scope) (Event, bool) {
	o, ok := l.object(n, field, eventFields)
	if !ok {
		return Event{}, false
	}
	ev := Event{Line: o.node.Line}
	for key, dst := range map[string]*Text{"id": &ev.ID, "kind": &ev.Kind, "actor": &ev.Actor, "target": &ev.Target, "text": &ev.Text, "room": &ev.Room} {
		if v, f, ok := o.get(key); ok {
			*dst, _ = l.text(v, f, sc)
		}
	}
	if v, f, ok := o.get("at"); ok {
		ev.At, _ = l.timestamp(v, f)
	}
	if !o.has("text") && !o.has("actor") {
		l.errorf(o.node, field, "an event needs a text or an actor")
	}
	return ev, true
}

func (l *loader) toolResults(n *yaml.Node, field string, sc scope) []ToolResult {
	items, ok := l.list(n, field)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		l.errorf(resolve(n), field, "must hold at least one result")
	}
	var out []ToolResult
	for i, it := range items {
		f := index(field, i)
		o, ok := l.object(it, f, []string{"tool", "call", "content", "optional"})
		if !ok {
			continue
		}
		r := ToolResult{Line: o.node.Line}
		if v, fv, ok := o.get("tool"); ok {
			r.Tool, _ = l.word(v, fv)
			if l.set != nil && r.Tool != "" {
				if t, ok := l.set.Lookup(r.Tool); !ok || !t.Returns {
					l.errorf(resolve(v), fv, "the NPC has no returns: true tool %q; the game posts results only for those", r.Tool)
				}
			}
		}
		if v, fv, ok := o.get("call"); ok {
			r.Call, _ = l.text(v, fv, sc)
		}
		if !o.has("tool") && !o.has("call") {
			l.errorf(o.node, f, "a result needs the tool it answers (or the call id)")
		}
		if v, fv, ok := o.get("content"); ok {
			r.Content, _ = l.text(v, fv, sc)
		} else {
			l.errorf(o.node, join(f, "content"), "is required")
		}
		if v, fv, ok := o.get("optional"); ok {
			r.Optional, _ = l.boolean(v, fv)
		}
		out = append(out, r)
	}
	return out
}

func (l *loader) compact(n *yaml.Node, field string, sc scope) Text {
	rv := resolve(n)
	switch {
	case rv.Tag == "!!null", rv.Tag == "!!bool" && rv.Value == "true":
		return Text{}
	case rv.Kind == yaml.MappingNode:
		o, ok := l.object(rv, field, []string{"instruction"})
		if !ok {
			return Text{}
		}
		if v, f, ok := o.get("instruction"); ok {
			t, _ := l.text(v, f, sc)
			return t
		}
		return Text{}
	case isScalar(rv) && rv.Tag == "!!str":
		t, _ := l.text(rv, field, sc)
		return t
	}
	l.errorf(rv, field, "write compact: true, or the instruction as text, not %s", describe(rv))
	return Text{}
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (l *loader) repeat(n *yaml.Node, field string, sc scope) *Repeat {
	o, ok := l.object(n, field, []string{"count", "as", "vars", "steps"})
	if !ok {
		return nil
	}
	r := &Repeat{As: "i"}
	if v, f, ok := o.get("count"); ok {
		r.Count, _ = l.integer(v, f, 1, MaxRepeat)
	} else {
		l.errorf(o.node, join(field, "count"), "is required (how many times to repeat)")
	}
	if v, f, ok := o.get("as"); ok {
		if s, ok := l.word(v, f); ok {
			if !identRe.MatchString(s) || s == "npc" {
				l.errorf(resolve(v), f, "%q cannot name a placeholder (letters, digits and _, not npc)", s)
			} else {
				r.As = s
			}
		}
	}
	names := []string{r.As}
	if v, f, ok := o.get("vars"); ok {
		if vo, ok := l.object(v, f, nil); ok {
			for _, k := range vo.keys {
				kf := join(f, k)
				if !identRe.MatchString(k) || k == "npc" || k == r.As {
					l.errorf(vo.knode[k], kf, "%q cannot name a placeholder here (letters, digits and _, not npc or %s)", k, r.As)
					continue
				}
				vals, ok := l.stringList(vo.vals[k], kf)
				if !ok {
					continue
				}
				if len(vals) == 0 {
					l.errorf(resolve(vo.vals[k]), kf, "must hold at least one value")
					continue
				}
				r.Vars = append(r.Vars, Var{Name: k, Values: vals})
				names = append(names, k)
			}
		}
	}
	if v, f, ok := o.get("steps"); ok {
		items, ok := l.list(v, f)
		if ok && len(items) == 0 {
			l.errorf(resolve(v), f, "must hold at least one step")
		}
		r.Steps = l.steps(items, f, sc.with(names...))
	} else {
		l.errorf(o.node, join(field, "steps"), "is required")
	}
	return r
}
