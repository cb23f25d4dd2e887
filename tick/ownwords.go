package tick

import (
	"strings"

	"github.com/npcd/npcd/internal/text"
)

// commitmentPhrases are what marks an NPC committing itself: promises,
// debts, deals, deadlines — what players come back to hold it to. Each is
// matched as a whole phrase: case-insensitively (with Unicode simple case
// folding, so 'ſ' is an 's' and the Kelvin sign a 'k'), with an ASCII word
// boundary (between [0-9A-Za-z_] and anything else) on either side.
var commitmentPhrases = func() []string {
	p := []string{"i'll", "i will", "i shall", "i promise", "promised", "i swear", "i owe", "you owe",
		"owe me", "owes me", "owe you", "owes you", "deal", "agreed", "it's yours", "come back"}
	for _, w := range []string{"tomorrow", "tonight", "dawn", "dusk", "noon", "morning", "evening",
		"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "next"} {
		p = append(p, "by "+w)
	}
	return p
}()

// phrasesByFirst indexes commitmentPhrases by their first byte.
var phrasesByFirst = func() (t [256][]string) {
	for _, p := range commitmentPhrases {
		t[p[0]] = append(t[p[0]], p)
	}
	return t
}()

// lowerASCII maps an ASCII capital letter to its small letter.
func lowerASCII(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// hasCommitment reports whether s holds one of commitmentPhrases.
func hasCommitment(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !text.IsWordByte(b) {
			continue
		}
		// i starts a word; every phrase starts with an ASCII letter.
		if i == 0 || !text.IsWordByte(s[i-1]) {
			for _, p := range phrasesByFirst[lowerASCII(b)] {
				if end, ok := text.FoldPrefix(s, i, p); ok && text.IsWordByte(s[end-1]) != (end < len(s) && text.IsWordByte(s[end])) {
					return true
				}
			}
		}
	}
	return false
}

// withoutQuotes returns s less its double-quoted passages, straight ("…")
// or curly (“…”), each running to its closing quote or, cut off, to the end.
func withoutQuotes(s string) string {
	var b strings.Builder
	last := 0 // s[last:] is not yet copied to b
	for i := 0; i < len(s); {
		var open, closing string
		switch {
		case s[i] == '"':
			open, closing = `"`, `"`
		case s[i] == "“"[0] && strings.HasPrefix(s[i:], "“"):
			open, closing = "“", "”"
		default:
			i++
			continue
		}
		if b.Cap() == 0 {
			b.Grow(len(s)) // s holds a quote, so is not empty
		}
		b.WriteString(s[last:i])
		i += len(open)
		k := strings.Index(s[i:], closing)
		if k < 0 {
			return b.String()
		}
		i += k + len(closing)
		last = i
	}
	if b.Cap() == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// ownCommitment reports whether text commits its speaker in its own words:
// a commitment phrase outside what it quotes of others.
func ownCommitment(text string) bool {
	return hasCommitment(withoutQuotes(text))
}
