package main

import (
	"github.com/npcd/npcd/aihistory"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

func readREADME(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// readmeCommandLines returns every npcd command line the README shows: the
// lines of its examples (`$ npcd …`, `./npcd …`, `go run ./cmd/npcd …`) and
// the code spans of its prose and tables that start with "npcd ".
func readmeCommandLines(readme string) []string {
	var out []string
	inBlock := false
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			l := strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			for _, prefix := range []string{"npcd ", "./npcd ", "go run ./cmd/npcd "} {
				if rest, ok := strings.CutPrefix(l, prefix); ok {
					rest, _, _ = strings.Cut(rest, " #")
					out = append(out, "npcd "+rest)
				}
			}
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			if strings.HasPrefix(m[1], "npcd ") {
				out = append(out, strings.ReplaceAll(m[1], `\|`, "|"))
			}
		}
	}
	return out
}

// words splits a command line like a shell, dropping the optional marks
// ([--json]) the README's synopses use.
func words(line string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '[' || r == ']':
			inWord = inWord || cur.Len() > 0
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// checkCommandLine reports what of line the CLI does not have: commands,
// flags, aihistory views.
func checkCommandLine(root *cobra.Command, line string) []string {
	args := words(line)[1:]
	var problems []string
	cmd := root
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, hasValue := strings.Cut(name, "=")
			f := cmd.Flags().Lookup(name)
			if f == nil {
				f = cmd.InheritedFlags().Lookup(name)
			}
			switch {
			case name == "help" || (cmd == root && name == "version"): // cobra's own
			case f == nil:
				problems = append(problems, "npcd "+cmd.Name()+" has no flag --"+name)
			case f.Value.Type() != "bool" && !hasValue:
				i++ // its value
			}
			continue
		}
		if len(positional) == 0 && cmd.HasSubCommands() {
			found := true
			var next *cobra.Command
			for _, alt := range strings.Split(a, "|") {
				c, _, err := cmd.Find([]string{alt})
				if err != nil || c == cmd {
					found = false
					problems = append(problems, "npcd "+cmd.Name()+" has no command "+alt)
					continue
				}
				next = c
			}
			if found && next != nil {
				if strings.Contains(a, "|") {
					return problems // alternatives: their flags would need each command
				}
				cmd = next
				continue
			}
		}
		positional = append(positional, a)
	}
	if cmd.Name() == "aihistory" && len(positional) > 1 {
		view := positional[1]
		isPlaceholder := view == "view" || strings.ToUpper(view) == view
		var names []string
		for _, v := range aihistory.Views() {
			names = append(names, v.Name)
		}
		if !isPlaceholder && !slices.Contains(names, view) {
			problems = append(problems, "npcd aihistory has no view "+view)
		}
	}
	return problems
}

// Every npcd command line the README shows names commands, flags and views
// that exist.
func TestREADMECommandsExist(t *testing.T) {
	t.Parallel()
	lines := readmeCommandLines(readREADME(t))
	if len(lines) < 15 {
		t.Fatalf("found only %d command lines in the README: %q", len(lines), lines)
	}
	root := rootCommand(io.Discard, io.Discard, func(string) string { return "" })
	for _, line := range lines {
		for _, p := range checkCommandLine(root, line) {
			t.Errorf("README: %q: %s", line, p)
		}
	}
	// The check itself finds what is missing.
	for line, want := range map[string]string{
		"npcd compakt brom":                  "no command compakt",
		"npcd aihistory brom --colour":       "no flag --colour",
		"npcd aihistory brom histories":      "no view histories",
		"npcd bench ticks|budgets":           "no command budgets",
		"npcd scenario run FILE [--jsonish]": "no flag --jsonish",
	} {
		if got := strings.Join(checkCommandLine(root, line), "; "); !strings.Contains(got, want) {
			t.Errorf("check of %q = %q, want %q", line, got, want)
		}
	}
}

// The README's aihistory section lists exactly the views there are, and
// names only flags aihistory has.
func TestREADMEAIHistorySection(t *testing.T) {
	t.Parallel()
	readme := readREADME(t)
	_, section, ok := strings.Cut(readme, "\n## Inspecting an NPC: `npcd aihistory`\n")
	if !ok {
		t.Fatal("README has no aihistory section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	cmd := aihistoryCommand(io.Discard, func(string) string { return "" })
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| `") {
			if m := codeSpan.FindStringSubmatch(line); m != nil {
				documented = append(documented, strings.Fields(m[1])[0])
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			if name, ok := strings.CutPrefix(m[1], "--"); ok {
				name = strings.Fields(name)[0]
				if cmd.Flags().Lookup(name) == nil {
					t.Errorf("README's aihistory section names --%s, which aihistory lacks", name)
				}
			}
		}
	}
	var views []string
	for _, v := range aihistory.Views() {
		views = append(views, v.Name)
	}
	sort.Strings(views)
	sort.Strings(documented)
	if diff := cmp.Diff(views, documented); diff != "" {
		t.Errorf("views (-aihistory +README):\n%s", diff)
	}
}

// readmeCall is one curl command of the README's walkthrough and the
// output it quotes.
type readmeCall struct {
	method, path, body string
	quoted             string
}

var (
	curlMethod = regexp.MustCompile(`-X (\w+)`)
	curlURL    = regexp.MustCompile(`'?localhost:8740([^'\s]+)'?`)
	curlBody   = regexp.MustCompile(`(?s)-d '(.*)'`)
	jsonKey    = regexp.MustCompile(`"([a-z_]+)":`)
)

func readmeWalkthrough(t *testing.T, readme string) []readmeCall {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n### Walkthrough\n")
	if !ok {
		t.Fatal("README has no walkthrough")
	}
	_, block, _ := strings.Cut(section, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var calls []readmeCall
	var cmd, quoted strings.Builder
	flush := func() {
		if cmd.Len() == 0 {
			return
		}
		c := cmd.String()
		call := readmeCall{method: "GET", quoted: quoted.String()}
		if m := curlMethod.FindStringSubmatch(c); m != nil {
			call.method = m[1]
		}
		if m := curlURL.FindStringSubmatch(c); m != nil {
			call.path = m[1]
		}
		if m := curlBody.FindStringSubmatch(c); m != nil {
			call.body = m[1]
		}
		calls = append(calls, call)
		cmd.Reset()
		quoted.Reset()
	}
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(line, "curl "):
			flush()
			cmd.WriteString(line + "\n")
		case strings.HasPrefix(line, "#"):
			quoted.WriteString(line + "\n")
		case strings.TrimSpace(line) == "":
		default:
			cmd.WriteString(line + "\n")
		}
	}
	flush()
	return calls
}

// The README's walkthrough runs as written against a fresh daemon, and the
// outputs it quotes have the fields the daemon answers with.
func TestREADMEWalkthrough(t *testing.T) {
	calls := readmeWalkthrough(t, readREADME(t))
	if len(calls) < 4 {
		t.Fatalf("found %d curl commands in the walkthrough, want 4", len(calls))
	}
	_, addr, stop := startDaemonAt(t, t.TempDir())
	defer stop()
	quotedKeys := 0
	for _, c := range calls {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		req, err := http.NewRequest(c.method, "http://"+addr+c.path, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Errorf("%s %s = %d %s", c.method, c.path, resp.StatusCode, got)
			continue
		}
		for _, m := range jsonKey.FindAllStringSubmatch(c.quoted, -1) {
			quotedKeys++
			if !strings.Contains(string(got), `"`+m[1]+`":`) {
				t.Errorf("%s %s: the README quotes a field %q the daemon does not answer with:\n%s", c.method, c.path, m[1], got)
			}
		}
	}
	if quotedKeys < 10 {
		t.Errorf("checked only %d quoted fields", quotedKeys)
	}
}

// readmeOutputs returns the blacksmith examples of the README's aihistory
// section: each "$ npcd aihistory brom …" command with the output quoted
// under it.
func readmeOutputs(readme string) map[string]string {
	out := map[string]string{}
	var cmd string
	var body strings.Builder
	flush := func() {
		if cmd != "" {
			out[cmd] = body.String()
		}
		cmd = ""
		body.Reset()
	}
	inBlock := false
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "```") {
			flush()
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "$ npcd aihistory brom"); ok {
			flush()
			cmd = "brom" + rest
			continue
		}
		if cmd != "" {
			body.WriteString(line + "\n")
		}
	}
	flush()
	return out
}

var (
	labelRe  = regexp.MustCompile(`^([A-Z][A-Z]+(?: [A-Z][A-Z]+)*)(?: \(\d+\))?(?:\s{2,}|:|$)`)
	headerRe = regexp.MustCompile(`^│(?: [A-Z][A-Z ]*[A-Z] +│)+$`)
)

// shape is what of a view's output the README can promise: its section
// labels (CONTEXT, LOST, …) and its table headers, in order.
func shape(out string) []string {
	var s []string
	for _, line := range strings.Split(out, "\n") {
		if m := labelRe.FindStringSubmatch(line); m != nil {
			s = append(s, m[1])
		}
		if headerRe.MatchString(line) {
			s = append(s, strings.Join(strings.Fields(strings.ReplaceAll(line, "│", " ")), " "))
		}
	}
	return s
}

func TestShape(t *testing.T) {
	t.Parallel()
	out := "Brom (brom) · model builtin\n\nCONTEXT      ███ 72.9%\nLOST (1): in the replaced messages\n" +
		"┌────┐\n│ DETAIL  │ KIND   │\n├────┤\n│ sword   │ thing  │\nKEPT (9)\n"
	want := []string{"CONTEXT", "LOST", "DETAIL KIND", "KEPT"}
	if diff := cmp.Diff(want, shape(out)); diff != "" {
		t.Errorf("shape (-want +got):\n%s", diff)
	}
}

// The outputs the README quotes for the blacksmith scenario have the shape
// the views print today: the same section labels and table headers.
func TestREADMEOutputsHaveTheViewsShape(t *testing.T) {
	examples := readmeOutputs(readREADME(t))
	if len(examples) < 3 {
		t.Fatalf("found %d aihistory examples in the README, want 3", len(examples))
	}
	db := scenarioDB(t, "blacksmith.yaml", t.TempDir())
	for cmd, quoted := range examples {
		args := strings.Fields(cmd)
		for i, a := range args {
			if a == "npcd.db" {
				args[i] = db
			}
		}
		got := mustAIHistory(t, args...)
		want := shape(quoted)
		have := shape(got)
		// The README elides with "…": each quoted label and header must
		// appear, in order, in the real output.
		j := 0
		for _, w := range want {
			for j < len(have) && have[j] != w {
				j++
			}
			if j == len(have) {
				t.Errorf("npcd aihistory %s: the README quotes %q, which the output lacks (or not in that order); output's shape %q", cmd, w, have)
				break
			}
			j++
		}
		if len(want) == 0 {
			t.Errorf("npcd aihistory %s: read only %q from the README's example", cmd, want)
		}
	}
}
