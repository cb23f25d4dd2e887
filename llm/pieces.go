package llm

import (
	"unicode"
	"unicode/utf8"
)

// cl100kPiece returns the length in bytes of the first piece of s as the
// cl100k_base encoding splits its input before byte-pair encoding each piece
// alone: the same split as the tokenizer's pattern
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// without a regular expression. s must be valid UTF-8 and not empty (the
// tokenizer reads an invalid byte as U+FFFD, which this split does not),
// and must not hold DEL (U+007F), which the tokenizer's engine leaves out
// of every class of the pattern, so that no piece holds it and it is not
// counted at all.
// \s is unicode.IsSpace, \p{L} unicode.IsLetter and \p{N} unicode.IsNumber,
// as in the tokenizer's regular expression engine.
func cl100kPiece(s string) int {
	r0, n0 := decodeRune(s)
	// A contraction: 's 't 're 've 'm 'll 'd, in any case.
	if r0 == '\'' && len(s) > 1 {
		r1, n1 := decodeRune(s[1:])
		switch foldASCII(r1) {
		case 's', 't', 'm', 'd':
			return 1 + n1
		case 'r', 'v':
			if r2, n2 := decodeRune(s[1+n1:]); foldASCII(r2) == 'e' {
				return 1 + n1 + n2
			}
		case 'l':
			if r2, n2 := decodeRune(s[1+n1:]); foldASCII(r2) == 'l' {
				return 1 + n1 + n2
			}
		}
	}
	// Letters, with at most one leading character that is no line break,
	// letter or number.
	if isLetter(r0) {
		return n0 + letters(s[n0:])
	}
	if r0 != '\r' && r0 != '\n' && !isNumber(r0) {
		if r1, _ := decodeRune(s[n0:]); isLetter(r1) {
			return n0 + letters(s[n0:])
		}
	}
	// One to three numbers.
	if isNumber(r0) {
		i := n0
		for k := 1; k < 3 && i < len(s); k++ {
			r, n := decodeRune(s[i:])
			if !isNumber(r) {
				break
			}
			i += n
		}
		return i
	}
	// Other characters, with at most one leading space, and the line
	// breaks after them.
	start := -1
	if isOther(r0) {
		start = n0
	} else if r0 == ' ' && len(s) > 1 {
		if r1, n1 := decodeRune(s[1:]); isOther(r1) {
			start = 1 + n1
		}
	}
	if start >= 0 {
		i := start
		for i < len(s) {
			r, n := decodeRune(s[i:])
			if !isOther(r) {
				break
			}
			i += n
		}
		for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
			i++
		}
		return i
	}
	// White space (r0 is white space here). The tokenizer's engine matches
	// \s*[\r\n]+ as white space other than line breaks, then a run of line
	// breaks: a run of white space with a line break in it is split after
	// its first run of line breaks (checked by TestPiecesAreTheTokenizers).
	end, last := 0, 0
	for end < len(s) {
		r, n := decodeRune(s[end:])
		if r == '\r' || r == '\n' {
			for end < len(s) && (s[end] == '\r' || s[end] == '\n') {
				end++
			}
			return end
		}
		if !unicode.IsSpace(r) {
			break
		}
		last = end
		end += n
	}
	// White space without a line break: all of it at the end of s; else
	// all of it but its last character, which goes with what follows; else
	// the one character.
	if end < len(s) && last > 0 {
		return last
	}
	return end
}

// decodeRune is utf8.DecodeRuneInString with a fast path for ASCII; it
// returns utf8.RuneError and 0 for an empty s.
func decodeRune(s string) (rune, int) {
	if s == "" {
		return utf8.RuneError, 0
	}
	if s[0] < utf8.RuneSelf {
		return rune(s[0]), 1
	}
	return utf8.DecodeRuneInString(s)
}

// letters returns the length of the run of letters s starts with.
func letters(s string) int {
	i := 0
	for i < len(s) {
		r, n := decodeRune(s[i:])
		if !isLetter(r) {
			break
		}
		i += n
	}
	return i
}

// foldASCII lower-cases an ASCII letter and reads ſ (U+017F, which case
// folding equates with s) as s; it returns any other rune as it is.
func foldASCII(r rune) rune {
	switch {
	case 'A' <= r && r <= 'Z':
		return r + 'a' - 'A'
	case r == 'ſ':
		return 's'
	}
	return r
}

func isLetter(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
	}
	return unicode.IsLetter(r)
}

func isNumber(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9'
	}
	return unicode.IsNumber(r)
}

// isOther reports whether r is neither white space, a letter nor a number.
func isOther(r rune) bool {
	if r < utf8.RuneSelf {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' ||
			r == ' ' || '\t' <= r && r <= '\r')
	}
	return !unicode.IsSpace(r) && !unicode.IsLetter(r) && !unicode.IsNumber(r)
}
