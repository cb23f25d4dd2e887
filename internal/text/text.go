package text

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Ellipsis marks where Clip and ClipRunes cut a text.
const Ellipsis = "…"

// Truncate returns the longest prefix of s of at most n bytes that ends on
// a character boundary. It adds nothing, so stored text stays within n.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Clip returns s, or its first n bytes (cut on a character boundary)
// followed by Ellipsis when s is longer: for messages and prompts, where
// the reader must see that something was left out.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Truncate(s, n) + Ellipsis
}

// ClipRunes returns s, or its first n-1 characters followed by Ellipsis
// when s has more than n characters, so the result is n characters wide:
// for table cells.
func ClipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(0, n-1)]) + Ellipsis
}

// OneLine folds every run of white space in s, line breaks included, into
// one space and trims both ends.
func OneLine(s string) string {
	if isOneLine(s) {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// isOneLine reports whether OneLine would return s unchanged: its only
// white space (as strings.Fields sees it) is single ASCII spaces between
// other characters.
func isOneLine(s string) bool {
	space := true // as at the start: a space there would be trimmed
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			if c == ' ' && !space {
				space = true
				continue
			}
			if asciiSpace(c) {
				return false
			}
			space = false
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			return false
		}
		i += n
		space = false
	}
	return !space || s == ""
}

// asciiSpace reports whether c is an ASCII white-space byte by
// unicode.IsSpace.
func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// Thousands formats n with a comma between groups of three digits: 12,345.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Counts lists counts as "N key", joined by ", ": the keys of order first,
// in that order, then the others by count, most first, then by name. Keys
// counted zero are left out; "" when none is left.
func Counts(m map[string]int, order ...string) string {
	var parts []string
	seen := map[string]bool{}
	for _, k := range order {
		if !seen[k] && m[k] > 0 {
			parts = append(parts, strconv.Itoa(m[k])+" "+k)
		}
		seen[k] = true
	}
	var rest []string
	for k, n := range m {
		if !seen[k] && n > 0 {
			rest = append(rest, k)
		}
	}
	slices.SortFunc(rest, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	for _, k := range rest {
		parts = append(parts, strconv.Itoa(m[k])+" "+k)
	}
	return strings.Join(parts, ", ")
}

// IsWordByte reports whether b is an ASCII word character (as \w matches);
// every byte of a multi-byte UTF-8 sequence is not.
func IsWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// FoldPrefix reports whether s at i begins with word (lower-case ASCII)
// under simple case folding, as (?i) in a regular expression reads it (an
// ASCII letter in either case, ſ (U+017F) for s and K (U+212A, Kelvin)
// for k), and where the match ends.
func FoldPrefix(s string, i int, word string) (end int, ok bool) {
	for j := 0; j < len(word); j++ {
		if i >= len(s) {
			return 0, false
		}
		c, b := word[j], s[i]
		switch {
		case b == c || 'a' <= c && c <= 'z' && b == c-'a'+'A':
			i++
		case c == 's' && strings.HasPrefix(s[i:], "ſ"):
			i += len("ſ")
		case c == 'k' && strings.HasPrefix(s[i:], "\u212a"):
			i += len("\u212a")
		default:
			return 0, false
		}
	}
	return i, true
}
