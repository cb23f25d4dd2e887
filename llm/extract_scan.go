package llm

import "strings"

// Hand-written matchers for the builtin model's extraction and reflection:
// each returns what the regular expression in its comment would
// (builtin_regexp_test.go keeps those expressions and checks the two
// agree), without running one.

// isSpaceByte reports whether c is in the regular expressions' \s class:
// ASCII white space but the vertical tab.
func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// skipSpace returns i moved past the \s characters of s from i.
func skipSpace(s string, i int) int {
	for i < len(s) && isSpaceByte(s[i]) {
		i++
	}
	return i
}

// matchEntry returns the groups of a match of
//
//	^\[(\d+)\]\s*(?:\((?:[^)]*?importance (\d+))?[^)]*\)\s*)?(.*)$
//
// a journal line of an extract or reflect prompt: its id, the importance
// its parenthesis gives (if any) and its text.
func matchEntry(s string) (id, importance, text string, ok bool) {
	if s == "" || s[0] != '[' {
		return "", "", "", false
	}
	i := 1
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i == 1 || i >= len(s) || s[i] != ']' {
		return "", "", "", false
	}
	id = s[1:i]
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '(' {
		if end := strings.IndexByte(s[i:], ')'); end >= 0 {
			inner := s[i+1 : i+end]
			for from := 0; ; {
				k := strings.Index(inner[from:], "importance ")
				if k < 0 {
					break
				}
				d := from + k + len("importance ")
				e := d
				for e < len(inner) && '0' <= inner[e] && inner[e] <= '9' {
					e++
				}
				if e > d {
					importance = inner[d:e]
					break
				}
				from += k + 1
			}
			i = skipSpace(s, i+end+1)
		}
	}
	text = s[i:]
	if strings.IndexByte(text, '\n') >= 0 {
		return "", "", "", false
	}
	return id, importance, text, true
}

// eventTime returns the length of the prefix of s that
//
//	^\[[^\]]*\]\s*
//
// matches, the time stamp of a perceived line, or -1 when it matches none.
func eventTime(s string) int {
	if s == "" || s[0] != '[' {
		return -1
	}
	i := strings.IndexByte(s, ']')
	if i < 0 {
		return -1
	}
	return skipSpace(s, i+1)
}

// stripEventTime returns s without its time stamp (see eventTime).
func stripEventTime(s string) string {
	if n := eventTime(s); n >= 0 {
		return s[n:]
	}
	return s
}

// matchSpeaker returns the groups of a match of
//
//	^([^\s:"]{1,64}) (?:says|said|whispers to [^:]+|shouts|asks)\s*:\s*("(?:[^"\\]|\\.)*"|.*)$
//
// the speaker and what was said, quoted or not.
func matchSpeaker(s string) (who, said string, ok bool) {
	i := runRunes(s, 0, 64, " \t\n\f\r:\"")
	if i == 0 || i >= len(s) || s[i] != ' ' {
		return "", "", false
	}
	who = s[:i]
	u := s[i+1:]
	switch {
	case strings.HasPrefix(u, "says"), strings.HasPrefix(u, "said"):
		u = u[len("says"):]
	case strings.HasPrefix(u, "shouts"):
		u = u[len("shouts"):]
	case strings.HasPrefix(u, "asks"):
		u = u[len("asks"):]
	case strings.HasPrefix(u, "whispers to "):
		u = u[len("whispers to "):]
		k := strings.IndexByte(u, ':')
		if k <= 0 {
			return "", "", false
		}
		u = u[k:]
	default:
		return "", "", false
	}
	u = u[skipSpace(u, 0):]
	if u == "" || u[0] != ':' {
		return "", "", false
	}
	u = u[skipSpace(u, 1):]
	if q, ok := quotedPrefix(u); ok && len(q) == len(u) {
		return who, u, true
	}
	if strings.IndexByte(u, '\n') >= 0 {
		return "", "", false
	}
	return who, u, true
}

// matchLeadingActor returns the first group of a match of
//
//	^([A-Za-z][\w'-]{1,63})
//
// (with the space that ends it): a name opening an entry.
func matchLeadingActor(s string) (string, bool) {
	if s == "" || !('a' <= s[0] && s[0] <= 'z' || 'A' <= s[0] && s[0] <= 'Z') {
		return "", false
	}
	i := 1
	for i < len(s) && i < 64 && isSpeakerByte(s[i]) {
		i++
	}
	if i < 2 || i >= len(s) || s[i] != ' ' {
		return "", false
	}
	return s[:i], true
}
