package llm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dlclark/regexp2/v2"
	"github.com/tiktoken-go/tokenizer"
)

// cl100kPattern is the pattern the tokenizer splits cl100k_base input with.
const cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// regexpPieces splits s with the tokenizer's own pattern and engine.
func regexpPieces(t testing.TB, re *regexp2.Regexp, s string) []string {
	var out []string
	m, err := re.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func splitPieces(s string) []string {
	var out []string
	for s != "" {
		i := cl100kPiece(s)
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// randomText draws a text from pieces that exercise every branch of the
// split: letters of several scripts and cases, numbers of several kinds,
// runs of white space and line breaks, contractions, punctuation, symbols.
func randomText(r *rand.Rand) string {
	atoms := []string{
		"a", "Z", "sword", "Brom", "é", "ß", "Ж", "мир", "中文", "日本", "ﬁ", "ǅ", "ʰ", "\u0301", "\u0915\u093f",
		"0", "7", "42", "2026", "١٢٣", "²", "½", "Ⅻ", "①",
		" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\u00a0", "\u3000", "\u2028", "\u0085", "\v", "\f",
		"'", "'s", "'S", "'t", "'re", "'RE", "'Ve", "'m", "'ll", "'lL", "'d", "'x", "'ſ", "'K", "'\u212a",
		".", ",", "!", "?", "...", "—", "“", "”", "\"", "(", ")", "[", "]", "#", "-", "*", "/", "\\", ":", ";",
		"€", "😀", "👍🏽", "\u200b", "\ufeff", "\ufffd", "<|endoftext|>", "_", "@", "~", "\x7f", "\x00", "\x1b",
	}
	n := 1 + r.IntN(24)
	var b strings.Builder
	for range n {
		if r.IntN(8) == 0 {
			// Any code point but a surrogate, mostly from the first planes.
			c := rune(r.IntN(0x3000))
			if r.IntN(4) == 0 {
				c = rune(r.IntN(0x110000))
			}
			if 0xd800 <= c && c < 0xe000 {
				c = 'x'
			}
			b.WriteRune(c)
			continue
		}
		b.WriteString(atoms[r.IntN(len(atoms))])
	}
	return b.String()
}

// TestPiecesAreTheTokenizers checks the hand-written split against the
// tokenizer's regular expression, and the counter's counts against the
// tokenizer's, on many random texts.
func TestPiecesAreTheTokenizers(t *testing.T) {
	re := regexp2.MustCompile(cl100kPattern, regexp2.None)
	codec, err := tokenizer.Get(tokenizer.Cl100kBase)
	if err != nil {
		t.Fatal(err)
	}
	c := newCounter(codec)
	if c.split == nil {
		t.Fatal("the cl100k_base counter has no split")
	}
	r := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	texts := []string{"don't", "DON'T", "we'Re", "it'ſ", "a  b", "a \n b", "x\n\n  \ny", "  ", "\n", "'", "1234567", "a\x7fb", ". \x7f\x7f", "..\n\n", " .x", "\t.", "don't   stop\r\n\r\n1 2  3"}
	for range n {
		texts = append(texts, randomText(r))
	}
	for _, s := range texts {
		want := regexpPieces(t, re, s)
		if got := splitPieces(s); !strings.Contains(s, "\x7f") && !slicesEqual(got, want) {
			t.Fatalf("split of %q:\n got  %q\n want %q", s, got, want)
		}
		lib, _ := codec.Count(s)
		if got := c.tokenize(s); got != lib {
			t.Fatalf("tokenize(%q) = %d, the tokenizer counts %d", s, got, lib)
		}
		if got := c.Text(s); got != lib {
			t.Fatalf("Text(%q) = %d, the tokenizer counts %d", s, got, lib)
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPiecesInvalidUTF8 checks that a text that is not valid UTF-8 is
// counted by the tokenizer itself, which reads each bad byte as U+FFFD.
func TestPiecesInvalidUTF8(t *testing.T) {
	codec, err := tokenizer.Get(tokenizer.Cl100kBase)
	if err != nil {
		t.Fatal(err)
	}
	c := newCounter(codec)
	for _, s := range []string{"\xff", "ab\xffcd", "sword\xc3", "\xe2\x80 x"} {
		want, _ := codec.Count(s)
		if got := c.Text(s); got != want {
			t.Errorf("Text(%q) = %d, the tokenizer counts %d", s, got, want)
		}
	}
}

// BenchmarkCounterNewText counts texts the counter has not seen whole,
// as a tick's new event lines are: their words recur, their numbers and
// times do not. "tokenizer" is the same counter without its own split.
func BenchmarkCounterNewText(b *testing.B) {
	codec, err := tokenizer.Get(tokenizer.Cl100kBase)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"pieces", "tokenizer"} {
		b.Run(name, func(b *testing.B) {
			c := newCounter(codec)
			if name == "tokenizer" {
				c.split = nil
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c.Text(fmt.Sprintf("[2026-11-26 04:%02d] alice says: \"Round %d: have you seen my sword, brom-%d? It's been %d days.\"", i%60, i, i%100, i%7))
			}
		})
	}
}

// TestWithBreaksIsExact checks that a line and its line breaks, counted
// from the cached count of the line alone, count what the tokenizer counts.
func TestWithBreaksIsExact(t *testing.T) {
	codec, err := tokenizer.Get(tokenizer.Cl100kBase)
	if err != nil {
		t.Fatal(err)
	}
	c := newCounter(codec)
	r := rand.New(rand.NewPCG(3, 4))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	lines := []string{"[#12 user turn 3] alice says: \"hello\"", "[#13 assistant turn 3] say: \"Aye.\"", "a .", "a  .", "x\t!]", "a\n.", "ok", "42", "é.", "a\x1b.", "..", " .", "1 ?!"}
	for range n {
		lines = append(lines, randomText(r))
	}
	derived := 0
	for _, line := range lines {
		for _, breaks := range []string{"\n", "\n\n", "\r\n", "\n\r\n"} {
			s := line + breaks
			c.count(line)
			c.tokenize(s) // its pieces, not its count
			c.mu.Lock()
			got, ok := c.withBreaks(s)
			c.mu.Unlock()
			if !ok {
				continue
			}
			derived++
			if want, _ := codec.Count(s); got != want {
				t.Fatalf("withBreaks(%q) = %d, the tokenizer counts %d", s, got, want)
			}
		}
	}
	if derived < n/4 {
		t.Fatalf("only %d of %d texts counted from their line", derived, 4*len(lines))
	}
	t.Logf("%d of %d texts counted from their line", derived, 4*len(lines))
}
