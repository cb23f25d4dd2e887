package scenarios

import (
	"encoding/json"
	"strings"

	"go.yaml.in/yaml/v3"
)

func (l *loader) script(n *yaml.Node, field string) *Script {
	o, ok := l.object(n, field, []string{"default", "replies"})
	if !ok {
		return nil
	}
	s := &Script{}
	if v, f, ok := o.get("default"); ok {
		s.Default = l.reply(v, f, false)
	}
	if v, f, ok := o.get("replies"); ok {
		items, _ := l.list(v, f)
		for i, it := range items {
			s.Replies = append(s.Replies, l.reply(it, index(f, i), true))
		}
	}
	return s
}

func (l *loader) reply(n *yaml.Node, field string, matched bool) Reply {
	known := []string{"say", "emote", "text", "calls"}
	if matched {
		known = append([]string{"when", "times"}, known...)
	}
	o, ok := l.object(n, field, known)
	if !ok {
		return Reply{}
	}
	r := Reply{Line: o.node.Line}
	if matched && !o.has("say") && !o.has("emote") && !o.has("text") && !o.has("calls") {
		l.errorf(o.node, field, "a reply needs say, emote, text or calls (text: \"\" for an empty reply)")
	}
	if v, f, ok := o.get("when"); ok {
		r.When = l.match(v, f)
	}
	if v, f, ok := o.get("times"); ok {
		r.Times, _ = l.integer(v, f, 0, MaxRepeat)
	}
	for key, dst := range map[string]*string{"say": &r.Say, "emote": &r.Emote} {
		if v, f, ok := o.get(key); ok {
			*dst, _ = l.word(v, f)
			l.needTool(resolve(v), f, key)
		}
	}
	if v, f, ok := o.get("text"); ok {
		if resolve(v).Tag == "!!null" {
			r.Text = ""
		} else {
			r.Text, _ = l.str(v, f)
		}
	}
	if v, f, ok := o.get("calls"); ok {
		items, _ := l.list(v, f)
		for i, it := range items {
			fi := index(f, i)
			co, ok := l.object(it, fi, []string{"tool", "args"})
			if !ok {
				continue
			}
			var call Call
			if tv, tf, ok := co.get("tool"); ok {
				call.Tool, _ = l.word(tv, tf)
			} else {
				l.errorf(co.node, join(fi, "tool"), "is required")
				continue
			}
			if av, af, ok := co.get("args"); ok {
				if resolve(av).Kind != yaml.MappingNode {
					l.errorf(resolve(av), af, "must be a mapping of arguments, not %s", describe(av))
					continue
				}
				val, _ := l.toValue(av, af)
				call.Args, _ = val.(map[string]any)
			}
			l.checkCall(co.node, fi, call)
			r.Calls = append(r.Calls, call)
		}
	}
	return r
}

func (l *loader) match(n *yaml.Node, field string) Match {
	o, ok := l.object(n, field, []string{"tool", "contains", "matches"})
	if !ok {
		return Match{}
	}
	var m Match
	if v, f, ok := o.get("tool"); ok {
		m.Tool, _ = l.word(v, f)
		l.needTool(resolve(v), f, m.Tool)
	}
	if v, f, ok := o.get("contains"); ok {
		m.Contains, _ = l.word(v, f)
	}
	if v, f, ok := o.get("matches"); ok {
		m.Matches, _ = l.regex(v, f)
	}
	return m
}

// needTool reports a tool the NPC does not have.
func (l *loader) needTool(n *yaml.Node, field, name string) {
	if l.set == nil || name == "" {
		return
	}
	if _, ok := l.set.Lookup(name); !ok {
		l.errorf(n, field, "the NPC has no tool %q (it has: %s)", name, strings.Join(l.set.Names(), ", "))
	}
}

// checkCall validates a scripted call's arguments against the tool's
// schema, as the engine will.
func (l *loader) checkCall(n *yaml.Node, field string, c Call) {
	if l.set == nil {
		return
	}
	if _, ok := l.set.Lookup(c.Tool); !ok {
		l.needTool(n, join(field, "tool"), c.Tool)
		return
	}
	args := c.Args
	if args == nil {
		args = map[string]any{}
	}
	raw, err := jsonText(args)
	if err == nil {
		_, err = l.set.Validate(c.Tool, raw)
	}
	if err != nil {
		l.errorf(n, join(field, "args"), "%v", err)
	}
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
