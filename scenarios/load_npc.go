package scenarios

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tick"
	"github.com/npcd/npcd/tools"
)

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
	set, _, err := tick.CheckNPC(&c, tools.NewInternals(nil, nil).Tools(), llm.NewCounter(c.Model))
	if err == nil {
		err = sleep.CheckSchedule(&c, "UTC", l.sc.Start)
	}
	var (
		fe *character.FieldError
		se *tools.SchemaError
		ue *character.UnfitError
	)
	switch {
	case errors.As(err, &fe):
		l.errorf(at(fe.Field), join(field, fe.Field), "%s", fe.Message)
		return
	case errors.As(err, &se):
		l.errorf(at(se.Field), join(field, se.Field), "not a usable JSON Schema: %v", se.Err)
		return
	case errors.As(err, &ue):
		l.errorf(at(ue.Field), join(field, ue.Field), "%s", ue.Message)
		return
	case err != nil:
		l.errorf(n, join(field, "tools"), "%v", err)
		return
	}
	l.set = set
}
