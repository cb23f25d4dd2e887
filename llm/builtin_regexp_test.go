package llm

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The regular expressions the builtin model's hand-written matchers
// (scan.go) replace, kept here to check that both agree.
var (
	nameRe     = regexp.MustCompile(`You are ([^,.\n]{1,64}), a character in a living game world`)
	roleRe     = regexp.MustCompile(`^You are [^,.]{1,64}, ([^.\n]{3,120})`)
	eventRe    = regexp.MustCompile(`^\[([^\]]*)\] (.+)$`)
	speechRe   = regexp.MustCompile(`^([\w'-]+(?: [\w'-]+){0,2}) (says|shouts|whispers to [^:"]{1,64}): ("(?:[^"\\]|\\.)*")`)
	ownWordsRe = regexp.MustCompile(`(?i)\bI (said|say)\b:|\bI remember:`)

	entryRe      = regexp.MustCompile(`^\[(\d+)\]\s*(?:\((?:[^)]*?importance (\d+))?[^)]*\)\s*)?(.*)$`)
	eventTimeRe  = regexp.MustCompile(`^\[[^\]]*\]\s*`)
	speakerRe    = regexp.MustCompile(`^([^\s:"]{1,64}) (?:says|said|whispers to [^:]+|shouts|asks)\s*:\s*("(?:[^"\\]|\\.)*"|.*)$`)
	leadingActor = regexp.MustCompile(`^([A-Za-z][\w'-]{1,63}) `)
)

// bestRecallRegexp is bestRecall as it was, with a map of words per line
// and ownWordsRe, for comparison.
func bestRecallRegexp(text string, recalled []string) string {
	words := contentWords(text)
	best, bestN := "", 0
	for _, r := range recalled {
		if ownWordsRe.MatchString(r) {
			continue
		}
		n := 0
		rw := contentWords(r)
		for w := range words {
			if rw[w] {
				n++
			}
		}
		if n > bestN {
			best, bestN = r, n
		}
	}
	return best
}

// scanText draws a text from atoms that the patterns care about, so that
// most draws come close to matching and many do.
func scanText(r *rand.Rand, atoms []string, n int) string {
	var b strings.Builder
	for range 1 + r.IntN(n) {
		b.WriteString(atoms[r.IntN(len(atoms))])
	}
	return b.String()
}

var scanAtoms = []string{
	"You are ", "You are", "you are ", "Brom", "Old Tom", ", a character in a living game world", ", a character", ", ", ",", ".", "\n", " ",
	"the gruff village blacksmith of Oakvale", "ab", "x", "é", "ſ", "\u212a", "\xff", "😀", strings.Repeat("n", 40), strings.Repeat("ü", 30),
	"[", "]", "[2026-11-21 10:00] ", "] ", "alice", "Bob-the_2nd", "O'Neil", " says: ", " shouts: ", " whispers to ", "says", ": ", ":",
	`"`, `\`, `\"`, `\n`, "\\\n", "hi there", "I ", "i ", "I", "said", "SAID", "say", "Say", "remember", "REMEMBER", "ſaid", "ſay", "I said:", "I say :", "I remember:", "aI said:", "_I say:", "-I say:",
	"\t", "sword", "horseshoe", "mare", "THE", "Sword", "İ", "\u212aey", "key", "123", "ab1",
}

// speechText draws a text shaped like a perceived line of speech: a
// speaker of zero to four words, a verb, a quoted text, each often subtly
// wrong.
func speechText(r *rand.Rand) string {
	var b strings.Builder
	if r.IntN(3) == 0 {
		b.WriteString(pickOf(r, "[2026-11-21 10:00] ", "[x]", "[] ", "[a] b] "))
	}
	words := []string{"alice", "Old", "Tom", "O'Neil", "Bob-the_2nd", "é", "says", "a:b", "x\"", "", "shouts"}
	for i := range r.IntN(5) {
		if i > 0 {
			b.WriteString(pickOf(r, " ", " ", " ", "  "))
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	b.WriteString(pickOf(r, " says: ", " shouts: ", " whispers to ", " says:", " asks: ", " whispers to Brom: ", "says: "))
	if r.IntN(3) == 0 {
		b.WriteString(pickOf(r, "Brom", "you", "x\"y", strings.Repeat("é", 64), strings.Repeat("e", 65), "") + pickOf(r, ": ", ":", " : "))
	}
	if r.IntN(6) > 0 {
		b.WriteString(`"`)
	}
	for range r.IntN(8) {
		b.WriteString(pickOf(r, "hi", " ", `\"`, `\`, "\n", "\\\n", "é", "\xff", `\é`, "sword", ":"))
	}
	if r.IntN(4) > 0 {
		b.WriteString(`"`)
	}
	b.WriteString(pickOf(r, "", "", " and more", `"`, "\n"))
	return b.String()
}

// personaText draws a text shaped like a persona line or system prompt.
func personaText(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString(pickOf(r, "", "", "Grumpy.\n\n", "x You are ", "You are You are "))
	b.WriteString(pickOf(r, "You are ", "You are ", "You are", "you are "))
	for range r.IntN(6) {
		b.WriteString(pickOf(r, "Brom", " ", "Old Tom", "é", "ü", strings.Repeat("n", 30), ".", "\n", "\xff", "ſ"))
	}
	b.WriteString(pickOf(r, ", a character in a living game world", ", the gruff village blacksmith of Oakvale", ", ab", ", abc", ", é\u00fcé", ", a", ",", "", ", x.y"))
	for range r.IntN(4) {
		b.WriteString(pickOf(r, ". Stay.", "\n", strings.Repeat("m", 60), " and more", "é"))
	}
	return b.String()
}

func pickOf(r *rand.Rand, options ...string) string { return options[r.IntN(len(options))] }

// TestScanMatchesRegexps checks each hand-written matcher against the
// regular expression it replaces on many random texts.
func TestScanMatchesRegexps(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	fixed := []string{
		"You are Brom, a character in a living game world.", "You are Brom, the gruff village blacksmith of Oakvale.",
		`[2026-11-21 10:00] alice says: "I lost my sword."`, `Old Tom whispers to Brom: "psst \"x\""`, `a b c d says: "x"`,
		`alice says says: "x"`, `alice says: "unterminated`, "Hmph. Alice, I remember: the forge", "I said: no", "FI said: no",
	}
	texts := append([]string(nil), fixed...)
	for range n {
		texts = append(texts, scanText(r, scanAtoms, 12), speechText(r), personaText(r))
	}
	for _, s := range texts {
		name, ok := matchName(s)
		if m := nameRe.FindStringSubmatch(s); (m != nil) != ok || ok && m[1] != name {
			t.Fatalf("matchName(%q) = %q, %v; the regexp finds %q", s, name, ok, m)
		}
		role, ok := matchRole(s)
		if m := roleRe.FindStringSubmatch(s); (m != nil) != ok || ok && m[1] != role {
			t.Fatalf("matchRole(%q) = %q, %v; the regexp finds %q", s, role, ok, m)
		}
		body, ok := matchEvent(s)
		if m := eventRe.FindStringSubmatch(s); (m != nil) != ok || ok && m[2] != body {
			t.Fatalf("matchEvent(%q) = %q, %v; the regexp finds %q", s, body, ok, m)
		}
		who, quoted, ok := matchSpeech(s)
		if m := speechRe.FindStringSubmatch(s); (m != nil) != ok || ok && (m[1] != who || m[3] != quoted) {
			t.Fatalf("matchSpeech(%q) = %q, %q, %v; the regexp finds %q", s, who, quoted, ok, m)
		}
		if got, want := ownWords(s), ownWordsRe.MatchString(s); got != want {
			t.Fatalf("ownWords(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}

// TestBestRecallMatchesMaps checks bestRecall against the version that
// built a map of words per line.
func TestBestRecallMatchesMaps(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	n := 5000
	if testing.Short() {
		n = 500
	}
	for range n {
		text := scanText(r, scanAtoms, 10)
		recalled := make([]string, r.IntN(8))
		for i := range recalled {
			recalled[i] = scanText(r, scanAtoms, 10)
		}
		if got, want := bestRecall(text, recalled), bestRecallRegexp(text, recalled); got != want {
			t.Fatalf("bestRecall(%q, %q) = %q, want %q", text, recalled, got, want)
		}
	}
}

func TestIsSmallWord(t *testing.T) {
	n := 0
	for w := range smallWords {
		if len(w) > 2 {
			n++
			if !isSmallWord([]byte(w)) {
				t.Errorf("isSmallWord(%q) = false", w)
			}
		}
	}
	for _, w := range []string{"sword", "them", "thee", "knows", "abou"} {
		if isSmallWord([]byte(w)) {
			t.Errorf("isSmallWord(%q) = true", w)
		}
	}
	if n != 12 {
		t.Errorf("smallWords has %d words of more than two letters; isSmallWord knows 12", n)
	}
}

// entryText draws a text shaped like a journal line of an extract prompt,
// often subtly wrong.
func entryText(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString(pickOf(r, "[12]", "[7] ", "[]", "[x]", "[3", "12] ", "[42]\t", ""))
	if r.IntN(3) > 0 {
		b.WriteString(pickOf(r, "(", "(", "(importance 8)", "(2026-11-21, importance 7) ", "(importance x) ", ")"))
		for range r.IntN(5) {
			b.WriteString(pickOf(r, "importance ", "importance 9", "12", ", ", "2026-11-21", "\n", ")", " ", "importance  3", "é"))
		}
		b.WriteString(pickOf(r, ")", ") ", ")\n", "", ")\v"))
	}
	b.WriteString(pickOf(r, "", "[2026-11-21 10:00] ", "[x]", "[2026-11-21 10:00]\t\n", "["))
	b.WriteString(speakerLine(r))
	return b.String()
}

// speakerLine draws a text shaped like the body of a journal line.
func speakerLine(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString(pickOf(r, "Alice", "alice", "I", "Bob-the_2nd", "O'Neil", "é", "ab:c", "a\"b", "x", "A", strings.Repeat("n", 63), strings.Repeat("n", 64), strings.Repeat("é", 64), strings.Repeat("é", 65), "1abc", "", "Old Tom"))
	b.WriteString(pickOf(r, " ", " ", " ", "  ", "\t", ""))
	b.WriteString(pickOf(r, "says", "said", "shouts", "asks", "whispers to ", "whispers to Brom", "whispers to Brom ", "gives", "says:", "arrives", "sayss"))
	b.WriteString(pickOf(r, ":", ": ", " : ", "\t:\n ", "", " "))
	for range r.IntN(6) {
		b.WriteString(pickOf(r, `"`, `"hi"`, `\"`, `\`, "\n", "\\\n", "word", " ", ":", "é", `"a\"b"`))
	}
	return b.String()
}

// TestExtractScanMatchesRegexps checks each hand-written matcher of the
// extraction against the regular expression it replaces.
func TestExtractScanMatchesRegexps(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	texts := []string{`[12] (importance 8) [2026-11-21 10:00] Alice says: "I lost my sword."`, `[3] I said: "x"`, "[1] (a\nb) text", "[1] (x)\n text", "[1] x\ny"}
	for range n {
		texts = append(texts, entryText(r), speakerLine(r), scanText(r, scanAtoms, 8))
	}
	for _, s := range texts {
		id, imp, text, ok := matchEntry(s)
		if m := entryRe.FindStringSubmatch(s); (m != nil) != ok || ok && (m[1] != id || m[2] != imp || m[3] != text) {
			t.Fatalf("matchEntry(%q) = %q, %q, %q, %v; the regexp finds %q", s, id, imp, text, ok, m)
		}
		if got, want := eventTime(s) >= 0, eventTimeRe.MatchString(s); got != want {
			t.Fatalf("eventTime(%q) = %d, the regexp matches: %v", s, eventTime(s), want)
		}
		if got, want := stripEventTime(s), eventTimeRe.ReplaceAllString(s, ""); got != want {
			t.Fatalf("stripEventTime(%q) = %q, want %q", s, got, want)
		}
		who, said, ok := matchSpeaker(s)
		if m := speakerRe.FindStringSubmatch(s); (m != nil) != ok || ok && (m[1] != who || m[2] != said) {
			t.Fatalf("matchSpeaker(%q) = %q, %q, %v; the regexp finds %q", s, who, said, ok, m)
		}
		a, ok := matchLeadingActor(s)
		if m := leadingActor.FindStringSubmatch(s); (m != nil) != ok || ok && m[1] != a {
			t.Fatalf("matchLeadingActor(%q) = %q, %v; the regexp finds %q", s, a, ok, m)
		}
	}
}
