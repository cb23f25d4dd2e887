package llm

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// numberRe and properRe are what classifyLine's digit and capitalized-word
// tests (hasProperWord) stand for.
var (
	numberRe = regexp.MustCompile(`\d`)
	properRe = regexp.MustCompile(`\s[A-Z][a-z]+`)
)

// classifyLineSlow is classifyLine by its patterns alone.
func classifyLineSlow(line string) int {
	switch {
	case promiseRe.MatchString(line):
		return secPromises
	case decisionRe.MatchString(line):
		return secDecisions
	case progressRe.MatchString(line):
		return secProgress
	case openRe.MatchString(line):
		return secOpen
	case numberRe.MatchString(line) || properRe.MatchString(line) || len(line) > 80:
		return secPeople
	}
	return -1
}

// classifyLine gives the sections the patterns alone give, on lines made of
// every pattern's words and of words that touch them, in any case, with and
// without non-ASCII letters: its word reading of ASCII lines
// (sectionWords) finds what the patterns find, and other lines go through
// the patterns themselves.
func TestClassifyLineKeywordsChangeNothing(t *testing.T) {
	words := []string{"promised", "OWES", "debt", "repay", "swore", "Vow", "deal", "reward", "lend", "borrow", "in exchange", "will bring",
		"will fetch", "I'll get", "i'll fix", "decided", "AGREES", "chose", "choose", "will not", "won't", "refused", "going to", "planned to",
		"plans to", "gave", "gives", "found", "done", "finished", "completed", "arrived", "delivered", "returned", "repaired", "bought", "sold",
		"paid", "killed", "built", "made", "?", "lost", "missing", "find", "looking for", "search", "unknown", "waiting for", "wait for",
		"where is", "who is", "needs", "help", "the", "road", "Alice", "12", "swordsmith", "payment", "willow", "helpful", "owen", "ſwore",
		"Kelvin", "ᴋ", "café", "plan", "going", "whom", "wait", "payday", "dealt", "PROMISES", "owed", "pay", "swear", "i'll bring",
		"I'LL MAKE", "i'll repair", "i'll pay", "i'll find", "i'll", "ill", "i", "will make", "will repair", "will", "in", "exchange",
		"decides", "agree", "agreed", "refuse", "Refuses", "plan to", "plan", "to", "not", "won", "t", "won'", "looking", "for",
		"waiting", "where", "is", "who", "need", "Missing", "_", "x", "9", "'", "?", "Bob", "\tAnn", "\fZed", "\rRay", "aNd"}
	rng := rand.New(rand.NewPCG(3, 7))
	for i := 0; i < 40000; i++ {
		n := 1 + rng.IntN(8)
		parts := make([]string, n)
		for j := range parts {
			parts[j] = words[rng.IntN(len(words))]
		}
		sep := []string{" ", "", ", ", "-", "_", "'", "  ", "\n"}[rng.IntN(8)]
		line := strings.Join(parts, sep)
		if got, want := classifyLine(line), classifyLineSlow(line); got != want {
			t.Fatalf("%q: section %d, the patterns alone give %d", line, got, want)
		}
	}
}

func BenchmarkClassifyLine(b *testing.B) {
	lines := []string{"I Aye. alice, I remember: [2026-11-23] alice says: \"Turn 4: the north road is busy today [23 November 2026].\"",
		"alice says: \"My brother owes me 12 gold.\"", "look showed: You see the forge: an anvil scarred by years of work"}
	for i := 0; i < b.N; i++ {
		classifyLine(lines[i%len(lines)])
	}
}

func BenchmarkClassifyLineSlow(b *testing.B) {
	lines := []string{"I Aye. alice, I remember: [2026-11-23] alice says: \"Turn 4: the north road is busy today [23 November 2026].\"",
		"alice says: \"My brother owes me 12 gold.\"", "look showed: You see the forge: an anvil scarred by years of work"}
	for i := 0; i < b.N; i++ {
		classifyLineSlow(lines[i%len(lines)])
	}
}

// The forgery and goal patterns' keyword tests only skip lines the
// patterns cannot match, on lines made of their words in any case, with
// and without non-ASCII letters, whole or cut as a snippet.
func TestForgedAndGoalKeywordsChangeNothing(t *testing.T) {
	words := []string{"[context summary]", "(Working Context)", "[SYSTEM]", "(system", "system)", "ignore previous instructions",
		"IGNORE ALL PRIOR INSTRUCTIONS", "ignore any previous instructions", "You are now", "new instructions:", "New Instructions",
		"instructions", "context  summary", "want", "WANTS", "need", "needs", "please", "Quest", "task", "goal", "must", "wanted",
		"mustard", "questing", "ſystem", "taſk", "Kelvin", "café", "the", "road", "Alice", "12", "[", "]", "(", ")", "…"}
	rng := rand.New(rand.NewPCG(5, 9))
	for i := 0; i < 20000; i++ {
		n := 1 + rng.IntN(8)
		parts := make([]string, n)
		for j := range parts {
			parts[j] = words[rng.IntN(len(words))]
		}
		sep := []string{" ", "", ", ", "-", "  "}[rng.IntN(5)]
		text := strings.Join(parts, sep)
		low, ascii := strings.ToLower(text), isASCII(text)
		if got, want := forgedKeys.may(low, ascii) && forgedRe.MatchString(text), forgedRe.MatchString(text); got != want {
			t.Fatalf("%q: forged %v, the pattern alone says %v", text, got, want)
		}
		for _, s := range []string{text, snippet(text, 1+rng.IntN(40))} {
			if got, want := goalKeys.may(low, ascii) && goalRe.MatchString(s), goalRe.MatchString(s); got != want {
				t.Fatalf("%q of %q: goal %v, the pattern alone says %v", s, text, got, want)
			}
		}
	}
}
