package api

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readmeRoutes reads the route table of the README's "HTTP API" section.
// A cell lists code spans: "METHOD /path" names a route, and a bare
// "/suffix" (query string ignored) is the previous route's method on the
// NPC's path plus the suffix, as the table abbreviates the inspection routes.
func readmeRoutes(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## HTTP API\n")
	if !ok {
		t.Fatal("README.md has no HTTP API section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	span := regexp.MustCompile("`([^`]+)`")
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		method := ""
		for _, m := range span.FindAllStringSubmatch(cells[1], -1) {
			code, _, _ := strings.Cut(m[1], "?")
			var route string
			if meth, path, ok := strings.Cut(code, " "); ok {
				method, route = meth, meth+" "+path
			} else if strings.HasPrefix(code, "/") && method != "" {
				route = method + " /v1/npcs/{npc}" + code
			} else {
				continue
			}
			if !seen[route] {
				seen[route] = true
				out = append(out, route)
			}
		}
	}
	sort.Strings(out)
	return out
}

// The README's route table lists exactly the routes openapi.yaml documents.
func TestREADMERouteTableMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	var documented []string
	for path, item := range s.Paths {
		for method := range item {
			if httpMethods[method] {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(documented)
	readme := readmeRoutes(t)
	if len(readme) < 10 {
		t.Fatalf("read only %d routes from the README's table: %v", len(readme), readme)
	}
	if diff := cmp.Diff(documented, readme); diff != "" {
		t.Errorf("routes (-openapi.yaml +README.md):\n%s", diff)
	}
}
