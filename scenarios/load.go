package scenarios

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

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
