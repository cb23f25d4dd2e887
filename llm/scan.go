package llm

import (
	"strings"
	"unicode/utf8"

	"github.com/npcd/npcd/internal/text"
)

// Hand-written matchers for the builtin model's tick: each returns what the
// regular expression in its comment would (builtin_regexp_test.go keeps
// those expressions and checks the two agree), without running one.

// nameTail follows the NPC's name in the rules of its system prompt.
const nameTail = ", a character in a living game world"

// matchName returns the first group of the leftmost match of
//
//	You are ([^,.\n]{1,64}), a character in a living game world
func matchName(s string) (string, bool) {
	for i := 0; ; {
		j := strings.Index(s[i:], "You are ")
		if j < 0 {
			return "", false
		}
		start := i + j + len("You are ")
		k := runRunes(s, start, 64, ",.\n")
		if k > start && strings.HasPrefix(s[k:], nameTail) {
			return s[start:k], true
		}
		i += j + 1
	}
}

// matchRole returns the first group of a match of
//
//	^You are [^,.]{1,64}, ([^.\n]{3,120})
func matchRole(s string) (string, bool) {
	const head = "You are "
	if !strings.HasPrefix(s, head) {
		return "", false
	}
	k := runRunes(s, len(head), 64, ",.")
	if k == len(head) || !strings.HasPrefix(s[k:], ", ") {
		return "", false
	}
	start := k + 2
	end := runRunes(s, start, 120, ".\n")
	if utf8.RuneCountInString(s[start:end]) < 3 {
		return "", false
	}
	return s[start:end], true
}

// runRunes returns where the run of at most max runes of s from i that
// are none of the ASCII bytes in stop ends.
func runRunes(s string, i, max int, stop string) int {
	for n := 0; i < len(s) && n < max; n++ {
		c := s[i]
		if c < utf8.RuneSelf {
			if strings.IndexByte(stop, c) >= 0 {
				break
			}
			i++
			continue
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return i
}

// matchEvent returns the second group of a match of
//
//	^\[([^\]]*)\] (.+)$
func matchEvent(s string) (string, bool) {
	if s == "" || s[0] != '[' {
		return "", false
	}
	i := strings.IndexByte(s, ']')
	if i < 0 || i+1 >= len(s) || s[i+1] != ' ' {
		return "", false
	}
	body := s[i+2:]
	if body == "" || strings.IndexByte(body, '\n') >= 0 {
		return "", false
	}
	return body, true
}

// matchSpeech returns the first and third groups of a match of
//
//	^([\w'-]+(?: [\w'-]+){0,2}) (says|shouts|whispers to [^:"]{1,64}): ("(?:[^"\\]|\\.)*")
//
// the speaker and the quoted words, quotes included. The speaker is a name
// of at most three words, so speech quoted inside an emote is not read as
// someone else speaking.
func matchSpeech(s string) (who, quoted string, ok bool) {
	// The speaker is one to three words, each followed by a space: as
	// many as can be, then fewer.
	var ends [3]int
	n := 0
	for pos := 0; n < len(ends); n++ {
		e := pos
		for e < len(s) && isSpeakerByte(s[e]) {
			e++
		}
		if e == pos || e >= len(s) || s[e] != ' ' {
			break
		}
		ends[n] = e
		pos = e + 1
	}
	for ; n > 0; n-- {
		if q, ok := speechRest(s[ends[n-1]+1:]); ok {
			return s[:ends[n-1]], q, true
		}
	}
	return "", "", false
}

func isSpeakerByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '\'' || c == '-'
}

// speechRest matches the verb, the colon and the quoted words after a
// speaker, returning the quoted words.
func speechRest(u string) (string, bool) {
	var v string
	switch {
	case strings.HasPrefix(u, "says: "):
		v = u[len("says: "):]
	case strings.HasPrefix(u, "shouts: "):
		v = u[len("shouts: "):]
	case strings.HasPrefix(u, "whispers to "):
		t := u[len("whispers to "):]
		k := runRunes(t, 0, 64, ":\"")
		if k == 0 || !strings.HasPrefix(t[k:], ": ") {
			return "", false
		}
		v = t[k+2:]
	default:
		return "", false
	}
	return quotedPrefix(v)
}

// quotedPrefix returns the double-quoted string v starts with, in which a
// backslash escapes any character but a line break.
func quotedPrefix(v string) (string, bool) {
	if v == "" || v[0] != '"' {
		return "", false
	}
	for i := 1; i < len(v); {
		switch v[i] {
		case '"':
			return v[:i+1], true
		case '\\':
			if i+1 >= len(v) || v[i+1] == '\n' {
				return "", false
			}
			_, w := utf8.DecodeRuneInString(v[i+1:])
			i += 1 + w
		default:
			i++
		}
	}
	return "", false
}

// ownWords reports whether a recalled line is the NPC's own words: whether
// it matches
//
//	(?i)\bI (said|say)\b:|\bI remember:
func ownWords(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] != 'i' && s[i] != 'I' || s[i+1] != ' ' || i > 0 && text.IsWordByte(s[i-1]) {
			continue
		}
		rest := s[i+2:]
		for _, w := range [...]string{"said:", "say:", "remember:"} {
			if _, ok := text.FoldPrefix(rest, 0, w); ok {
				return true
			}
		}
	}
	return false
}

// appendLowerASCII appends the ASCII text s to dst, lower-cased.
func appendLowerASCII(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// wordScanner reads the content words of texts as contentWords does, into a
// buffer it reuses: lower-cased runs of a-z and 0-9 longer than two
// letters, small words left out.
type wordScanner struct {
	buf []byte
}

// words calls f with each content word of s, in order (repeats included),
// as the bounds of the word in ws.buf, which holds s lower-cased until the
// next call.
func (ws *wordScanner) words(s string, f func(i, j int)) {
	if ws.buf == nil {
		ws.buf = make([]byte, 0, 256)
	}
	if isASCII(s) {
		ws.buf = appendLowerASCII(ws.buf[:0], s)
	} else {
		ws.buf = append(ws.buf[:0], strings.ToLower(s)...)
	}
	b := ws.buf
	for i := 0; i < len(b); {
		if !isLowerAlnum(b[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(b) && isLowerAlnum(b[j]) {
			j++
		}
		if w := b[i:j]; len(w) > 2 && !isSmallWord(w) {
			f(i, j)
		}
		i = j
	}
}

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// isSmallWord reports whether smallWords holds w, of more than two letters,
// without hashing it.
func isSmallWord(w []byte) bool {
	switch string(w) {
	case "the", "you", "did", "what", "remember", "was", "and", "that", "your", "about", "recall", "know":
		return true
	}
	return false
}
