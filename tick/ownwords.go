package tick

import "strings"

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

// isWordByte reports whether b is an ASCII word character; every byte of a
// multi-byte UTF-8 sequence is not.
func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// lowerASCII maps an ASCII capital letter to its small letter.
func lowerASCII(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// foldPrefix reports whether s at i begins with phrase p under simple case
// folding, and where the match ends. p is lower-case ASCII.
func foldPrefix(s string, i int, p string) (int, bool) {
	for j := 0; j < len(p); j++ {
		if i >= len(s) {
			return 0, false
		}
		c, b := p[j], s[i]
		switch {
		case lowerASCII(b) == c:
			i++
		case c == 's' && strings.HasPrefix(s[i:], "ſ"):
			i += len("ſ")
		case c == 'k' && strings.HasPrefix(s[i:], "\u212a"): // Kelvin sign
			i += len("\u212a")
		default:
			return 0, false
		}
	}
	return i, true
}

// hasCommitment reports whether s holds one of commitmentPhrases.
func hasCommitment(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !isWordByte(b) {
			continue
		}
		// i starts a word; every phrase starts with an ASCII letter.
		if i == 0 || !isWordByte(s[i-1]) {
			for _, p := range phrasesByFirst[lowerASCII(b)] {
				if end, ok := foldPrefix(s, i, p); ok && isWordByte(s[end-1]) != (end < len(s) && isWordByte(s[end])) {
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
