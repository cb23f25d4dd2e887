package api

import (
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/inspect"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tick"
)

// spec is the part of openapi.yaml the tests read.
type spec struct {
	Paths      map[string]map[string]yaml.Node `yaml:"paths"`
	Components struct {
		Schemas    map[string]yaml.Node `yaml:"schemas"`
		Responses  map[string]yaml.Node `yaml:"responses"`
		Parameters map[string]yaml.Node `yaml:"parameters"`
	} `yaml:"components"`
}

type operation struct {
	Responses map[string]yaml.Node `yaml:"responses"`
}

var httpMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true}

func loadSpec(t *testing.T) spec {
	t.Helper()
	var s spec
	if err := yaml.Unmarshal(openAPISpec, &s); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	return s
}

// TestOpenAPIMatchesRoutes keeps openapi.yaml true: it documents exactly the
// routes the Server registers.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	var documented, served []string
	for path, item := range s.Paths {
		for method := range item {
			if httpMethods[method] {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	for _, rt := range routeTable() {
		// ServeMux and OpenAPI both write the id as {npc}; a wildcard such
		// as {rest...} would need converting here.
		served = append(served, rt.method+" "+rt.pattern)
	}
	sort.Strings(documented)
	sort.Strings(served)
	if diff := cmp.Diff(served, documented); diff != "" {
		t.Errorf("routes (-served +documented):\n%s", diff)
	}
}

// TestOpenAPIStatusCodes checks every operation documents the errors its
// route can answer.
func TestOpenAPIStatusCodes(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	for _, rt := range routeTable() {
		t.Run(rt.method+" "+rt.pattern, func(t *testing.T) {
			node := s.Paths[rt.pattern][strings.ToLower(rt.method)]
			var op operation
			if err := node.Decode(&op); err != nil {
				t.Fatal(err)
			}
			var want []string
			if !rt.open {
				want = append(want, "401", "500")
			}
			if strings.Contains(rt.pattern, "{npc}") {
				want = append(want, "400")
				if rt.method != "PUT" {
					want = append(want, "404")
				}
			}
			if rt.method == "PUT" || rt.method == "POST" {
				want = append(want, "413")
			}
			ok := false
			for code := range op.Responses {
				ok = ok || strings.HasPrefix(code, "2")
			}
			if !ok {
				t.Errorf("no 2xx response documented")
			}
			for _, code := range want {
				if _, found := op.Responses[code]; !found {
					t.Errorf("status %s not documented", code)
				}
			}
		})
	}
}

// TestOpenAPIRefsResolve catches a $ref to a component that does not exist.
func TestOpenAPIRefsResolve(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	var root yaml.Node
	if err := yaml.Unmarshal(openAPISpec, &root); err != nil {
		t.Fatal(err)
	}
	var walk func(n *yaml.Node)
	refs := 0
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "$ref" {
					refs++
					ref := n.Content[i+1].Value
					kind, name, _ := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
					var found bool
					switch kind {
					case "schemas":
						_, found = s.Components.Schemas[name]
					case "responses":
						_, found = s.Components.Responses[name]
					case "parameters":
						_, found = s.Components.Parameters[name]
					}
					if !found {
						t.Errorf("$ref %q does not resolve", ref)
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	if refs == 0 {
		t.Fatalf("no $ref found; the walk is broken")
	}
}

func TestOpenAPIIsServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.do("GET", "/openapi.yaml", "")
	if r.status != http.StatusOK || string(r.body) != string(openAPISpec) {
		t.Errorf("GET /openapi.yaml = %d, %d bytes; want 200 and the embedded file", r.status, len(r.body))
	}
	if ct := r.header.Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("Content-Type = %q, want application/yaml", ct)
	}
}

// TestOpenAPISchemasMatchTypes keeps each documented schema's properties
// equal to the JSON fields of the Go type the API sends or reads.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	types := map[string]any{
		"Error": ErrorBody{}, "Health": Health{},
		"NPCSettings": NPCSettings{}, "CompactionSettings": CompactionSettings{}, "MaskingSettings": MaskingSettings{},
		"SleepSettings": SleepSettings{}, "Tool": Tool{}, "NPC": NPC{}, "NPCList": NPCList{}, "Context": tick.Context{},
		"Event": Event{}, "EventsRequest": EventsRequest{}, "EventsAccepted": EventsAccepted{},
		"TickResult": tick.Result{}, "Action": tick.Action{}, "Usage": tick.Usage{}, "Compaction": tick.Compaction{},
		"BatchTickRequest": BatchTickRequest{}, "BatchTickResponse": BatchTickResponse{}, "BatchError": BatchError{}, "BatchLine": BatchLine{}, "BatchEvents": BatchEvents{}, "NPCEvents": NPCEvents{}, "AutoTickSettings": AutoTickSettings{},
		"Feed": Feed{}, "FeedTick": FeedTick{},
		"ToolResult": ToolResult{}, "ToolResultsRequest": ToolResultsRequest{}, "ToolResultsAccepted": ToolResultsAccepted{},
		"CompactRequest": CompactRequest{}, "CompactResponse": CompactResponse{},
		"Message": Message{}, "ToolCall": ToolCall{}, "HistoryResponse": HistoryResponse{},
		"JournalEntry": journal.Entry{}, "Sources": character.Sources{}, "JournalResponse": JournalResponse{},
		"Profile": character.Profile{}, "Fact": character.Fact{}, "ProfilesResponse": ProfilesResponse{},
		"CompactionRecord": sleep.Record{}, "CompactionsResponse": CompactionsResponse{},
		"SleepRequest": SleepRequest{}, "SleepReport": sleep.Report{},
		"Overview": Overview{}, "SleepStatus": SleepStatus{}, "Knowledge": Knowledge{},
		"MemoryResponse": MemoryResponse{}, "MemoryResult": MemoryResult{}, "MemorySources": MemorySources{},
		"MessageDetail": MessageDetail{}, "EntryDetail": EntryDetail{}, "MemoryDetail": MemoryDetail{}, "Memory": Memory{},
		"AsOfResponse": AsOfResponse{}, "TickRecord": TickRecord{}, "DiffResponse": DiffResponse{}, "Candidate": inspect.Candidate{},
		"TimelineResponse": TimelineResponse{}, "TickPoint": inspect.TickPoint{}, "Marker": inspect.Marker{},
	}
	for name := range s.Components.Schemas {
		if _, ok := types[name]; !ok {
			t.Errorf("schema %s has no Go type in this test", name)
		}
	}
	for name, v := range types {
		t.Run(name, func(t *testing.T) {
			node, ok := s.Components.Schemas[name]
			if !ok {
				t.Fatalf("no schema %s in openapi.yaml", name)
			}
			var schema struct {
				Properties map[string]yaml.Node `yaml:"properties"`
			}
			if err := node.Decode(&schema); err != nil {
				t.Fatal(err)
			}
			var documented []string
			for p := range schema.Properties {
				documented = append(documented, p)
			}
			sort.Strings(documented)
			if diff := cmp.Diff(jsonFields(reflect.TypeOf(v)), documented); diff != "" {
				t.Errorf("fields of %s (-Go +openapi.yaml):\n%s", name, diff)
			}
		})
	}
}

// jsonFields returns the JSON names encoding/json gives t's fields, sorted.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-" || !f.IsExported():
			continue
		case f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonFields(f.Type)...)
			continue
		case tag == "":
			tag = f.Name
		}
		out = append(out, tag)
	}
	sort.Strings(out)
	return out
}
