package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/gencache"
	"github.com/npcd/npcd/internal/text"
	"github.com/npcd/npcd/llm"
)

// Tool is one tool an NPC may call.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema of the arguments
	// Returns marks game tools whose results the game posts back; the turn
	// waits for them. Fire-and-forget game tools are answered "ok" at once.
	Returns bool
	// Internal tools run inside npcd; the others become actions for the game.
	Internal bool
	schema   *jsonschema.Schema
	// prompt is Parameters as offered to the model (PromptSchema).
	prompt json.RawMessage
}

// Set is an NPC's compiled tool set. It is immutable and safe for
// concurrent use.
type Set struct {
	tools  []*Tool
	byName map[string]*Tool
	defs   []llm.Tool // Definitions, made once the set is compiled
}

// refuseLoader keeps a schema from pulling anything in by $ref: a tool schema
// comes from the network and must not make npcd read files or URLs.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not allowed", url)
}

// MaxSchemaBytes bounds one tool's parameter schema.
const MaxSchemaBytes = 16 << 10

// compiled keeps compiled schemas by tool name and parameter schema: the
// NPCs of a world mostly declare the same tools, and npcd's internal
// tools are the same for all, so one compiled schema serves every NPC that
// declares it. A compiled schema is only read once built: validating with
// it is safe from any goroutine.
var compiled = schemaCache{schemas: gencache.New[string, *jsonschema.Schema](schemaEntries)}

// schemaCache holds compiled schemas in two generations of schemaEntries
// (gencache): one found only in the older is kept in the newer again, so
// the tools most NPCs declare stay, whatever schemas pass through.
type schemaCache struct {
	mu      sync.Mutex
	schemas gencache.Cache[string, *jsonschema.Schema]
}

// schemaEntries is how many schemas a generation of compiled holds.
const schemaEntries = 512

func (c *schemaCache) get(key string) (*jsonschema.Schema, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, fresh, ok := c.schemas.Get(key)
	if ok && !fresh {
		c.schemas.Put(key, s)
	}
	return s, ok
}

func (c *schemaCache) put(key string, s *jsonschema.Schema) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.schemas.Put(key, s)
}

// compileSchema compiles the parameter schema params of the tool name, or
// finds it compiled (compiled).
func compileSchema(name string, params json.RawMessage) (*jsonschema.Schema, error) {
	if len(params) > MaxSchemaBytes {
		return nil, fmt.Errorf("schema is larger than %d bytes", MaxSchemaBytes)
	}
	key := name + "\x00" + string(params)
	if s, ok := compiled.get(key); ok {
		return s, nil
	}
	s, err := compileNew(name, params)
	if err != nil {
		return nil, err
	}
	compiled.put(key, s)
	return s, nil
}

// compileNew compiles the parameter schema params of the tool name.
func compileNew(name string, params json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return nil, err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("must be a JSON object")
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, errors.New(`"type" must be "object": tool arguments are an object`)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	loc := "npcd://tools/" + name + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// Compile builds the tool set of an NPC from its declared game tools plus
// npcd's internal tools. A declared schema that is not JSON Schema, or a
// game tool named like an internal one, is a *SchemaError naming the field.
func Compile(game []character.ToolSpec, internal []Tool) (*Set, error) {
	s := &Set{byName: map[string]*Tool{}}
	for _, t := range internal {
		t := t
		t.Internal = true
		sch, err := compileSchema(t.Name, t.Parameters)
		if err != nil {
			return nil, fmt.Errorf("internal tool %s: %w", t.Name, err)
		}
		t.schema = sch
		s.add(&t)
	}
	for i, spec := range game {
		field := fmt.Sprintf("tools[%d]", i)
		if _, clash := s.byName[spec.Name]; clash {
			return nil, &SchemaError{Field: field + ".name", Err: fmt.Errorf("%w: %q is an internal tool", ErrReserved, spec.Name)}
		}
		params := spec.Parameters
		if params == nil {
			params = map[string]any{"type": "object"}
		}
		raw, err := json.Marshal(params)
		if err != nil {
			return nil, &SchemaError{Field: field + ".parameters", Err: err}
		}
		sch, err := compileSchema(spec.Name, raw)
		if err != nil {
			return nil, &SchemaError{Field: field + ".parameters", Err: err}
		}
		s.add(&Tool{Name: spec.Name, Description: spec.Description, Parameters: raw, Returns: spec.Returns, schema: sch})
	}
	s.defs = s.definitions()
	return s, nil
}

func (s *Set) add(t *Tool) {
	t.prompt = PromptSchema(t.Parameters)
	s.tools = append(s.tools, t)
	s.byName[t.Name] = t
}

// Lookup returns the tool called name.
func (s *Set) Lookup(name string) (*Tool, bool) {
	t, ok := s.byName[name]
	return t, ok
}

// Definitions returns the tools as offered to the model, game tools first
// then internal ones, each group in declaration order, each schema as
// PromptSchema renders it. They are made once, when the set is compiled,
// and shared by every call (a set serves every tick of the NPCs that
// declare its tools): the caller must not change them.
func (s *Set) Definitions() []llm.Tool {
	return s.defs
}

// definitions makes what Definitions returns.
func (s *Set) definitions() []llm.Tool {
	out := make([]llm.Tool, 0, len(s.tools))
	for _, internal := range []bool{false, true} {
		for _, t := range s.tools {
			if t.Internal == internal {
				out = append(out, llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.prompt})
			}
		}
	}
	return out
}

// boundsOnly are the schema keywords that only bound what a call may hold
// and tell the model nothing it needs in order to call the tool well: the
// arguments are validated against the full schema, and a call that breaks
// one of them is refused with a reason the model reads (CallError).
var boundsOnly = []string{"minLength", "maxLength", "maxProperties", "minProperties", "maxItems", "$schema", "$id", "$comment"}

// PromptSchema is a parameter schema as offered to the model: the same
// JSON without the keywords that only bound a call (boundsOnly) and without
// "additionalProperties": false, compact. Every prompt carries the tool
// definitions, so what they cost is paid on every model call. A schema
// that is not a JSON object is returned as it is.
func PromptSchema(params json.RawMessage) json.RawMessage {
	var doc any
	if err := json.Unmarshal(params, &doc); err != nil {
		return params
	}
	if _, ok := doc.(map[string]any); !ok {
		return params
	}
	out, err := json.Marshal(stripBounds(doc, false))
	if err != nil {
		return params
	}
	return out
}

// stripBounds removes boundsOnly keywords from a schema and its
// subschemas. Under "properties" the keys are property names, kept
// whatever they are called (named says so).
func stripBounds(v any, named bool) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, sub := range x {
			if !named {
				if slices.Contains(boundsOnly, k) {
					continue
				}
				if b, ok := sub.(bool); k == "additionalProperties" && ok && !b {
					continue
				}
			}
			if !named && isData(k) {
				out[k] = sub // values, not schemas
				continue
			}
			out[k] = stripBounds(sub, !named && isSchemaMap(k))
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, sub := range x {
			out[i] = stripBounds(sub, false)
		}
		return out
	}
	return v
}

// isData reports whether a schema keyword's value is data, never a schema.
func isData(keyword string) bool {
	switch keyword {
	case "enum", "const", "default", "examples", "required":
		return true
	}
	return false
}

// isSchemaMap reports whether a schema keyword's value maps names to
// subschemas.
func isSchemaMap(keyword string) bool {
	switch keyword {
	case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
		return true
	}
	return false
}

// Names returns the tool names, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.tools))
	for _, t := range s.tools {
		out = append(out, t.Name)
	}
	sort.Strings(out)
	return out
}

// MaxArgsBytes bounds a tool call's argument text.
const MaxArgsBytes = 32 << 10

// CallError says why a tool call was refused, in words meant for the model:
// it is sent back as the call's result so the model can correct itself.
type CallError struct {
	Tool   string
	Reason string
	Err    error // ErrUnknownTool or ErrInvalidArgs
}

func (e *CallError) Error() string { return e.Reason }

// Unwrap returns ErrUnknownTool or ErrInvalidArgs wrapped in an llm.Error
// with code bad_tool_call, so callers can sort it by code.
func (e *CallError) Unwrap() error { return &llm.Error{Code: llm.CodeBadToolCall, Err: e.Err} }

// Validate parses a call's raw arguments and checks them against the tool's
// schema. It returns the arguments as a JSON object, or a *CallError.
func (s *Set) Validate(name, args string) (map[string]any, error) {
	t, ok := s.byName[name]
	if !ok {
		return nil, &CallError{Tool: name, Err: ErrUnknownTool,
			Reason: fmt.Sprintf("error: there is no tool %q; available tools: %s", text.Clip(name, 64), strings.Join(s.Names(), ", "))}
	}
	if len(args) > MaxArgsBytes {
		return nil, &CallError{Tool: name, Err: ErrInvalidArgs, Reason: fmt.Sprintf("error: arguments of %s are longer than %d bytes", name, MaxArgsBytes)}
	}
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return nil, &CallError{Tool: name, Err: ErrInvalidArgs, Reason: fmt.Sprintf("error: arguments of %s are not valid JSON (%v); send a JSON object", name, err)}
	}
	if err := t.schema.Validate(doc); err != nil {
		return nil, &CallError{Tool: name, Err: ErrInvalidArgs, Reason: fmt.Sprintf("error: arguments of %s do not match its schema: %s", name, schemaMessage(err))}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, &CallError{Tool: name, Err: ErrInvalidArgs, Reason: fmt.Sprintf("error: arguments of %s must be a JSON object", name)}
	}
	// Numbers arrive as json.Number; they become float64, as
	// json.Unmarshal makes them.
	if !plainNumbers(obj) {
		return nil, &CallError{Tool: name, Err: ErrInvalidArgs, Reason: fmt.Sprintf("error: arguments of %s hold a number out of range", name)}
	}
	return obj, nil
}

// plainNumbers replaces, in place, every json.Number within v (a map or a
// slice decoded from JSON) by its float64; false when one does not fit.
func plainNumbers(v any) bool {
	conv := func(x any) (any, bool) {
		switch x := x.(type) {
		case json.Number:
			f, err := strconv.ParseFloat(string(x), 64)
			return f, err == nil
		case map[string]any, []any:
			return x, plainNumbers(x)
		}
		return x, true
	}
	ok := true
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if v[k], ok = conv(x); !ok {
				return false
			}
		}
	case []any:
		for i, x := range v {
			if v[i], ok = conv(x); !ok {
				return false
			}
		}
	}
	return true
}

func schemaMessage(err error) string {
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		out := ve.BasicOutput()
		var parts []string
		for _, u := range out.Errors {
			if u.Error == nil {
				continue
			}
			loc := u.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, u.Error.String()))
			if len(parts) == 5 {
				break
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
	}
	return text.Clip(err.Error(), 500)
}
