package scenarios

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-co-op/gocron/v2"
	"go.yaml.in/yaml/v3"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tick"
	"github.com/npcd/npcd/tools"
)

// Limits on what a file may ask for.
const (
	MaxRepeat      = 1_000_000
	MaxTicksInStep = 10_000
)

// Load reads and validates the scenario file at path. A file that is not a
// valid scenario is a *ValidationError listing every problem with its line.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenarios: %w", err)
	}
	return Parse(path, data)
}

// Parse validates a scenario from data; file names it in errors. Nothing
// runs: every problem a file can have without running it (unknown keys,
// wrong types, unknown step kinds, bad durations, regular expressions,
// times and placeholders, missing fields, NPC settings the engine would
// refuse, tools the NPC does not have) is reported here.
func Parse(file string, data []byte) (*Scenario, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, newValidationError([]*FieldError{syntaxError(file, err)})
	}
	if len(doc.Content) == 0 {
		return nil, newValidationError([]*FieldError{{File: file, Message: "the file is empty"}})
	}
	l := &loader{decoder: decoder{file: file, extensions: true}, sc: &Scenario{File: file, Model: ModelBuiltin, Start: DefaultStart(), ScheduledSleeps: true}}
	l.scenario(doc.Content[0])
	if err := newValidationError(l.errs); err != nil {
		return nil, err
	}
	return l.sc, nil
}

var yamlLineRe = regexp.MustCompile(`line (\d+)`)

func syntaxError(file string, err error) *FieldError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	fe := &FieldError{File: file, Message: "not YAML: " + msg}
	if m := yamlLineRe.FindStringSubmatchIndex(msg); m != nil && m[0] == 0 {
		fe.Line, _ = strconv.Atoi(msg[m[2]:m[3]])
		fe.Column = 1
		fe.Message = "not YAML: " + strings.TrimPrefix(msg[m[1]:], ": ")
	}
	return fe
}

// loader decodes one scenario file.
type loader struct {
	decoder
	sc *Scenario
	// set is the NPC's compiled tools, to check the tools the file names;
	// nil when the npc section is broken (its errors are reported already).
	set *tools.Set
}

// topFields are the keys of a scenario file; keys starting with "x-" are
// ignored too, so a file can keep texts it anchors (&look) and reuses (*look).
var topFields = []string{"name", "description", "start", "model", "scheduled_sleeps", "npc", "script", "steps"}

func (l *loader) scenario(n *yaml.Node) {
	o, ok := l.object(n, "", topFields)
	if !ok {
		return
	}
	for _, k := range []string{"name", "npc", "steps"} {
		if !o.has(k) {
			l.errorf(o.node, k, "is required")
		}
	}
	sc := l.sc
	if v, f, ok := o.get("name"); ok {
		sc.Name, _ = l.word(v, f)
	}
	if v, f, ok := o.get("description"); ok {
		sc.Description, _ = l.str(v, f)
	}
	if v, f, ok := o.get("start"); ok {
		if t, ok := l.timestamp(v, f); ok {
			sc.Start = t
		}
	}
	if v, f, ok := o.get("model"); ok {
		if m, ok := l.str(v, f); ok {
			if m != ModelBuiltin && m != ModelScripted && m != ModelOpenAI {
				l.errorf(resolve(v), f, "must be builtin, scripted or openai, not %q", m)
			}
			sc.Model = m
		}
	}
	if v, f, ok := o.get("scheduled_sleeps"); ok {
		sc.ScheduledSleeps, _ = l.boolean(v, f)
	}
	if v, f, ok := o.get("npc"); ok {
		l.npc(v, f)
	}
	if v, f, ok := o.get("script"); ok {
		sc.Script = l.script(v, f)
	}
	if sc.Model == ModelScripted && !o.has("script") {
		v, f, _ := o.get("model")
		l.errorf(resolve(v), f, "the scripted model needs a script section")
	}
	if v, f, ok := o.get("steps"); ok {
		items, ok := l.list(v, f)
		if ok && len(items) == 0 {
			l.errorf(resolve(v), f, "must hold at least one step")
		}
		sc.Steps = l.steps(items, f, scope{"npc"})
	}
}

func (l *loader) timestamp(n *yaml.Node, field string) (time.Time, bool) {
	s, ok := l.str(n, field)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		l.errorf(resolve(n), field, "%q is not a time like 2026-03-01T08:00:00Z", s)
		return time.Time{}, false
	}
	return t.UTC(), true
}

// ---- the NPC ----

var npcFields = []string{"id", "name", "persona", "context_window", "max_output_tokens", "max_steps", "compaction", "masking", "sleep", "tools"}

var idChars = regexp.MustCompile(`[^a-z0-9_-]+`)

func (l *loader) npc(n *yaml.Node, field string) {
	o, ok := l.object(n, field, npcFields)
	if !ok {
		return
	}
	c := &l.sc.NPC
	l.sc.NPCLine = o.node.Line
	before := len(l.errs)
	// where places the engine's own validation errors, which name fields
	// by their API path ("compaction.sleep_threshold", "tools[2].name").
	where := map[string]*yaml.Node{}
	for _, k := range []string{"name", "persona"} {
		if !o.has(k) {
			l.errorf(o.node, join(field, k), "is required")
		}
	}
	str := func(key string, dst *string) {
		if v, f, ok := o.get(key); ok {
			where[key] = resolve(v)
			*dst, _ = l.str(v, f)
		}
	}
	num := func(obj *object, key, path string, dst *int) {
		if v, f, ok := obj.get(key); ok {
			where[path] = resolve(v)
			*dst, _ = l.integer(v, f, 0, math.MaxInt32)
		}
	}
	ratio := func(obj *object, key, path string, dst *float64) {
		if v, f, ok := obj.get(key); ok {
			where[path] = resolve(v)
			*dst, _ = l.number(v, f)
		}
	}
	str("id", &c.ID)
	str("name", &c.Name)
	str("persona", &c.Persona)
	if c.ID == "" && c.Name != "" {
		c.ID = strings.Trim(idChars.ReplaceAllString(strings.ToLower(c.Name), "-"), "-")
		where["id"] = where["name"]
	}
	num(o, "context_window", "context_window", &c.ContextWindow)
	num(o, "max_output_tokens", "max_output_tokens", &c.MaxOutputTokens)
	num(o, "max_steps", "max_steps", &c.MaxSteps)
	if v, f, ok := o.get("compaction"); ok {
		where["compaction"] = resolve(v)
		if co, ok := l.object(v, f, []string{"sleep_threshold", "emergency_threshold", "preserve_recent_messages", "preserve_ratio", "target"}); ok {
			ratio(co, "sleep_threshold", "compaction.sleep_threshold", &c.Compaction.SleepThreshold)
			ratio(co, "emergency_threshold", "compaction.emergency_threshold", &c.Compaction.EmergencyThreshold)
			num(co, "preserve_recent_messages", "compaction.preserve_recent_messages", &c.Compaction.PreserveRecentMessages)
			ratio(co, "preserve_ratio", "compaction.preserve_ratio", &c.Compaction.PreserveRatio)
			ratio(co, "target", "compaction.target", &c.Compaction.Target)
		}
	}
	if v, f, ok := o.get("masking"); ok {
		where["masking"] = resolve(v)
		if mo, ok := l.object(v, f, []string{"enabled", "keep_recent_turns", "exempt_tools", "offload_bytes"}); ok {
			if v, f, ok := mo.get("enabled"); ok {
				if b, ok := l.boolean(v, f); ok {
					c.Masking.Enabled = &b
				}
			}
			num(mo, "keep_recent_turns", "masking.keep_recent_turns", &c.Masking.KeepRecentTurns)
			if v, f, ok := mo.get("exempt_tools"); ok {
				c.Masking.ExemptTools.V, _ = l.stringList(v, f)
			}
			num(mo, "offload_bytes", "masking.offload_bytes", &c.Masking.OffloadBytes)
		}
	}
	if v, f, ok := o.get("sleep"); ok {
		if so, ok := l.object(v, f, []string{"cron", "timezone"}); ok {
			if v, f, ok := so.get("cron"); ok {
				where["sleep.cron"] = resolve(v)
				c.Sleep.Cron, _ = l.str(v, f)
			}
			if v, f, ok := so.get("timezone"); ok {
				where["sleep.timezone"] = resolve(v)
				c.Sleep.Timezone, _ = l.str(v, f)
			}
		}
	}
	if v, f, ok := o.get("tools"); ok {
		where["tools"] = resolve(v)
		c.Tools.V = l.tools(v, f, where)
	}
	if len(l.errs) > before {
		return // the settings are incomplete; their own errors say why
	}
	l.checkNPC(o.node, field, where)
}

// tools decodes the NPC's game tools. A bare name is a tool without
// arguments; say and emote, bare or without parameters, are the default
// tools of that name (character.ResolveTool, as the HTTP API reads them).
func (l *loader) tools(n *yaml.Node, field string, where map[string]*yaml.Node) []character.ToolSpec {
	items, ok := l.list(n, field)
	if !ok {
		return nil
	}
	out := []character.ToolSpec{}
	for i, it := range items {
		f := index(field, i)
		api := fmt.Sprintf("tools[%d]", i)
		where[api] = resolve(it)
		if isScalar(resolve(it)) {
			name, _ := l.str(it, f)
			where[api+".name"] = resolve(it)
			out = append(out, character.ResolveTool(character.ToolSpec{Name: name}))
			continue
		}
		to, ok := l.object(it, f, []string{"name", "description", "parameters", "returns"})
		if !ok {
			continue
		}
		var spec character.ToolSpec
		if v, f, ok := to.get("name"); ok {
			where[api+".name"] = resolve(v)
			spec.Name, _ = l.word(v, f)
		} else {
			l.errorf(to.node, join(f, "name"), "is required")
		}
		if v, f, ok := to.get("description"); ok {
			spec.Description, _ = l.str(v, f)
		}
		if v, f, ok := to.get("parameters"); ok {
			where[api+".parameters"] = resolve(v)
			if resolve(v).Kind != yaml.MappingNode {
				l.errorf(resolve(v), f, "must be a JSON Schema written as a mapping, not %s", describe(v))
			} else if p, ok := l.toValue(v, f); ok {
				spec.Parameters, _ = p.(map[string]any)
			}
		}
		if v, f, ok := to.get("returns"); ok {
			spec.Returns, _ = l.boolean(v, f)
		}
		out = append(out, character.ResolveTool(spec))
	}
	return out
}

// checkNPC applies the engine's defaults and checks: the settings, the
// tool schemas and the sleep schedule, so a file the engine would refuse
// is refused before anything runs.
func (l *loader) checkNPC(n *yaml.Node, field string, where map[string]*yaml.Node) {
	c := l.sc.NPC
	c.Tools.V = slices.Clone(c.Tools.V)
	c.Model = character.DefaultModel
	c.ApplyDefaults()
	at := func(f string) *yaml.Node {
		for f != "" {
			if w, ok := where[f]; ok {
				return w
			}
			i := strings.LastIndexAny(f, ".[")
			if i < 0 {
				break
			}
			f = f[:i]
		}
		return n
	}
	var fe *character.FieldError
	if err := c.Validate(); errors.As(err, &fe) {
		l.errorf(at(fe.Field), join(field, fe.Field), "%s", fe.Message)
		return
	}
	set, err := tools.Compile(c.Tools.V, tools.NewInternals(nil, nil).Tools())
	var se *tools.SchemaError
	switch {
	case errors.As(err, &se):
		l.errorf(at(se.Field), join(field, se.Field), "not a usable JSON Schema: %v", se.Err)
		return
	case err != nil:
		l.errorf(n, join(field, "tools"), "%v", err)
		return
	}
	var ue *character.UnfitError
	if _, err := tick.CheckFit(&c, set, llm.NewCounter(c.Model)); errors.As(err, &ue) {
		l.errorf(at(ue.Field), join(field, ue.Field), "%s", ue.Message)
		return
	}
	if c.Sleep.Cron != "" {
		tz := c.Sleep.Timezone
		if tz == "" {
			tz = "UTC"
		}
		loc, err := time.LoadLocation(tz)
		if err == nil {
			err = gocron.NewDefaultCron(false).IsValid(c.Sleep.Cron, loc, l.sc.Start)
		}
		if err != nil {
			l.errorf(at("sleep.cron"), join(field, "sleep.cron"), "%q is not a cron expression (minute hour day month weekday): %v", c.Sleep.Cron, err)
			return
		}
	}
	l.set = set
}

// ---- the script ----

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

// ---- steps ----

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

// ---- expectations ----

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
