package tick

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// commitmentRe and quotedRe are the reference definitions that
// ownCommitment must agree with.
var (
	commitmentRe = regexp.MustCompile(`(?i)\b(i'll|i will|i shall|i promise|promised|i swear|i owe|you owe|owes? (me|you)|deal|agreed|it's yours|by (tomorrow|tonight|dawn|dusk|noon|morning|evening|monday|tuesday|wednesday|thursday|friday|saturday|sunday|next)|come back)\b`)
	quotedRe     = regexp.MustCompile(`"[^"]*("|$)|“[^”]*(”|$)`)
)

func refOwnCommitment(text string) bool {
	return commitmentRe.MatchString(quotedRe.ReplaceAllString(text, ""))
}

// Only what the NPC says in its own words commits it: a promise it quotes
// from someone else, closed or cut off mid-quote, is their words.
func TestOwnCommitmentIgnoresQuotes(t *testing.T) {
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"I'll have your horseshoe ready by tomorrow.", true},
		{"Aye, I owe you one, Bob.", true},
		{`Alice, I remember: [2026-06-01 08:00] Alice says: "I need a new horseshoe by tomorrow."`, false},
		{`Dunstan, I remember: Alice says: "I need a new horseshoe for my mare by tomorrow…`, false},
		{`You said "I promise", Bob, and I'll hold you to it.`, true},
		{"Fine weather for the fair.", false},
		{"An ideal morning.", false},
		{"Deal!", true},
		{"DEALer", false},
		{"i'll_", false},
		{"It's yourſ", false},      // 'ſ' folds to 's' but is no word character
		{"It's yourſx", true},      // so the boundary falls after it
		{"come bac\u212a.", false}, // likewise the Kelvin sign for 'k'
		{`I "" will`, false},
		{`I'"x"ll see`, true},
		{`“I'll”, said he`, false},
		{`”I'll“ go`, true},
	} {
		if got := ownCommitment(tt.text); got != tt.want {
			t.Errorf("ownCommitment(%q) = %v, want %v", tt.text, got, tt.want)
		}
		if ref := refOwnCommitment(tt.text); ref != tt.want {
			t.Errorf("reference on %q = %v, want %v", tt.text, ref, tt.want)
		}
	}
}

// ownCommitment agrees with the regular expressions it replaces, on
// realistic lines and on random mixes of phrases, case variants, word
// characters, quotes of both kinds, cut-off quotes and non-ASCII text.
func TestOwnCommitmentMatchesRegexps(t *testing.T) {
	pieces := []string{" ", " ", " ", ".", ",", "!", "?", "'", "’", "-", "_", "0", "7", "x", "Z", "é", "ſ", "\u212a", "İ", "ı",
		`"`, `"`, "“", "”", "„", "«", "»", "\n", "\t", "\xe2", "\xe2\x80", "\x80", "\xff", "\xc5", "s", "k", "K", "S", "e", "d"}
	words := append(append([]string{}, commitmentPhrases...),
		"i", "will", "shall", "by", "owe", "owes", "me", "you", "back", "come", "it's", "yours", "promise", "swear",
		"ideal", "dealer", "agreedly", "bye", "tomorrow", "next", "sword", "horseshoe", "Alice", "says", "said",
		"I'm", "I’ll", "i'l", "il'l", "deals", "comeback", "owed")
	lines := []string{
		`Brom, I remember: [2026-06-01 08:00] Alice says: "Have you seen my sword?"`,
		`Aye, I'll look for it by tonight. Come back at dusk.`,
		`You owe me 5 gold, and "I promise" means nothing from you.`,
		`She said “I will be back by noon” but it's yours now.`,
		`Round 12: have you seen my sword, brom-3?`,
	}
	variant := func(r *rand.Rand, s string) string {
		var b strings.Builder
		for _, c := range s {
			switch {
			case c == 's' && r.Intn(8) == 0:
				b.WriteString("ſ")
			case c == 'k' && r.Intn(4) == 0:
				b.WriteString("\u212a")
			case r.Intn(3) == 0:
				b.WriteString(strings.ToUpper(string(c)))
			default:
				b.WriteRune(c)
			}
		}
		return b.String()
	}
	r := rand.New(rand.NewSource(1))
	n, matched := 60000, 0
	if testing.Short() {
		n = 5000
	}
	for i := 0; i < n; i++ {
		var b strings.Builder
		if i%5 == 0 {
			b.WriteString(variant(r, lines[r.Intn(len(lines))]))
		}
		for k := r.Intn(12); k > 0; k-- {
			if r.Intn(2) == 0 {
				b.WriteString(variant(r, words[r.Intn(len(words))]))
			} else {
				b.WriteString(pieces[r.Intn(len(pieces))])
			}
		}
		text := b.String()
		if r.Intn(10) == 0 && len(text) > 0 { // cut anywhere, even mid-rune
			text = text[:r.Intn(len(text))]
		}
		want := refOwnCommitment(text)
		if got := ownCommitment(text); got != want {
			t.Fatalf("ownCommitment(%q) = %v, regexps say %v (valid UTF-8: %v)", text, got, want, utf8.ValidString(text))
		}
		if got, want := withoutQuotes(text), quotedRe.ReplaceAllString(text, ""); got != want {
			t.Fatalf("withoutQuotes(%q) = %q, regexp gives %q", text, got, want)
		}
		if want {
			matched++
		}
	}
	if matched < n/10 || matched > n*9/10 {
		t.Errorf("%d of %d texts commit: the mix tests too little of one side", matched, n)
	}
}

func FuzzOwnCommitment(f *testing.F) {
	f.Add(`I'll "go" by dawn`)
	f.Add("“deal")
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := ownCommitment(text), refOwnCommitment(text); got != want {
			t.Fatalf("ownCommitment(%q) = %v, regexps say %v", text, got, want)
		}
	})
}

func BenchmarkOwnCommitment(b *testing.B) {
	text := `Aye, Alice. Brom, I remember: [2026-06-01 08:00] Alice says: "Have you seen my sword?" I have not seen it, but I will look.`
	b.Run("scan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			ownCommitment(text)
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			refOwnCommitment(text)
		}
	})
}
