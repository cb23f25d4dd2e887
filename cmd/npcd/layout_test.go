package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/npcd/npcd"

// forbidden lists, per package, what it must not import (docs/ARCHITECTURE.md, "Floors"). Rules
// on npcd packages hold transitively; rules on outside modules hold for the
// package's own imports.
var forbidden = map[string][]string{
	"llm":               {"character", "journal", "tools", "sleep", "tick", "api", "scenarios", "store", "eval", "cmd"},
	"internal/text":     {"character", "journal", "tools", "sleep", "tick", "api", "scenarios", "store", "llm", "eval", "inspect", "cmd"},
	"internal/wordvec":  {"character", "journal", "tools", "sleep", "tick", "api", "scenarios", "store", "llm", "eval", "inspect", "cmd", "internal/text"},
	"internal/keylock":  {"character", "journal", "tools", "sleep", "tick", "api", "scenarios", "store", "llm", "eval", "inspect", "cmd"},
	"internal/freelist": {"character", "journal", "tools", "sleep", "tick", "api", "scenarios", "store", "llm", "eval", "inspect", "cmd"},
	"store":             {"character", "journal", "tools", "sleep", "tick", "api", "scenarios", "llm", "eval", "cmd"},
	"lease":             {"character", "journal", "tools", "sleep", "tick", "api", "scenarios", "llm", "eval", "inspect", "bench", "aihistory", "cmd"},
	"character":         {"tick", "sleep", "api", "cmd", "github.com/sashabaranov/go-openai"},
	"journal":           {"tick", "sleep", "api", "cmd", "github.com/sashabaranov/go-openai"},
	"tools":             {"tick", "sleep", "api", "cmd", "github.com/sashabaranov/go-openai"},
	"sleep":             {"tick", "api", "cmd", "github.com/sashabaranov/go-openai"},
	"tick":              {"api", "bench", "cmd", "github.com/sashabaranov/go-openai"},
	"api":               {"bench", "cmd"},
	"inspect":           {"tick", "api", "bench", "scenarios", "cmd", "github.com/sashabaranov/go-openai"},
	"scenarios":         {"api", "bench", "aihistory", "cmd"},
	"eval":              {"api", "bench", "aihistory", "cmd"},
	"bench":             {"scenarios", "eval", "aihistory", "cmd"},
	"aihistory":         {"scenarios", "eval", "bench", "cmd"},
}

type pkgInfo struct {
	dir      string
	imports  map[string]bool // full import paths of non-test files
	docFiles []string        // files carrying a package comment
}

func loadPackages(t *testing.T) map[string]*pkgInfo {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]*pkgInfo{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.ImportsOnly)
		if err != nil {
			return err
		}
		p := pkgs[rel]
		if p == nil {
			p = &pkgInfo{dir: rel, imports: map[string]bool{}}
			pkgs[rel] = p
		}
		if f.Doc != nil {
			p.docFiles = append(p.docFiles, filepath.Base(path))
		}
		for _, imp := range f.Imports {
			p.imports[strings.Trim(imp.Path.Value, `"`)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func TestEveryPackageHasOneDocComment(t *testing.T) {
	for dir, p := range loadPackages(t) {
		if dir == "." {
			continue
		}
		want := "doc.go"
		if strings.HasPrefix(dir, "cmd/") {
			want = "main.go"
		}
		if len(p.docFiles) != 1 || p.docFiles[0] != want {
			t.Errorf("package %s: package comment in %v, want exactly one, in %s", dir, p.docFiles, want)
		}
		switch filepath.Base(dir) {
		case "util", "utils", "common", "helpers", "misc":
			t.Errorf("package %s: name says nothing about what it owns", dir)
		}
	}
}

func TestImportRules(t *testing.T) {
	pkgs := loadPackages(t)
	// npcd imports of each package, transitively.
	var reach func(dir string, seen map[string]bool)
	reach = func(dir string, seen map[string]bool) {
		p := pkgs[dir]
		if p == nil {
			return
		}
		for imp := range p.imports {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok && !seen[rel] {
				seen[rel] = true
				reach(rel, seen)
			}
		}
	}
	for dir, rules := range forbidden {
		p := pkgs[dir]
		if p == nil {
			if dir != "eval" {
				t.Errorf("package %s is missing", dir)
			}
			continue
		}
		deps := map[string]bool{}
		reach(dir, deps)
		for _, bad := range rules {
			if strings.Contains(bad, ".") { // an outside module: direct imports
				for imp := range p.imports {
					if imp == bad || strings.HasPrefix(imp, bad+"/") {
						t.Errorf("%s imports %s", dir, imp)
					}
				}
				continue
			}
			for d := range deps {
				if d == bad || strings.HasPrefix(d, bad+"/") {
					t.Errorf("%s depends on %s", dir, d)
				}
			}
		}
	}
	// Nothing but cmd imports cmd.
	var names []string
	for dir := range pkgs {
		names = append(names, dir)
	}
	sort.Strings(names)
	for _, dir := range names {
		if strings.HasPrefix(dir, "cmd/") {
			continue
		}
		for imp := range pkgs[dir].imports {
			if strings.HasPrefix(imp, module+"/cmd") {
				t.Errorf("%s imports %s", dir, imp)
			}
		}
	}
}
