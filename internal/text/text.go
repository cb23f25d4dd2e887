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
// one space and trims both ends. A text already so (most are) is returned
// as it is, without splitting it into words and joining them again.
func OneLine(s string) string {
	space := true // before the first character: a leading space is folded
	for _, r := range s {
		switch {
		case r == ' ' && !space:
			space = true
		case r == ' ' || unicode.IsSpace(r):
			return strings.Join(strings.Fields(s), " ")
		default:
			space = false
		}
	}
	if space && s != "" { // a trailing space
		return strings.Join(strings.Fields(s), " ")
	}
	return s
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
