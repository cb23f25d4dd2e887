package inspect

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Candidate kinds: what sort of detail a candidate is.
const (
	KindName   = "name"
	KindPlace  = "place"
	KindNumber = "number"
	KindQuote  = "quote"
	KindThing  = "thing"
)

// Candidate is a detail of compacted text that a summary ought to keep: a
// name, a place, a number, a thing someone owns or a short quoted string,
// with the messages it
// appears in and where it was found again, if anywhere.
type Candidate struct {
	Text string `json:"text"`
	Kind string `json:"kind"`
	// MessageIDs are the replaced messages it appears in, ascending.
	MessageIDs []int64 `json:"message_ids"`
	// KeptIn names up to three places it was found in, the compaction's
	// own summary first, in the syntax of `npcd aihistory show` where there
	// is one: "m:ID" (the summary message), "mem:ID", "j:ID",
	// "profile:ENTITY", "persona". Empty for a lost candidate.
	KeptIn []string `json:"kept_in"`
}

// found is a candidate as extracted from one text.
type found struct {
	text string
	kind string
}

// Words that are capitalized mid-sentence without naming anything.
var capStop = map[string]bool{
	"i": true, "i'm": true, "i'll": true, "i've": true, "i'd": true, "i’m": true, "i’ll": true, "i’ve": true, "i’d": true,
	"ok": true, "oh": true, "ah": true, "aye": true, "hm": true, "hmm": true, "yes": true, "no": true,
}

// Lowercase words that may join the words of a capitalized phrase
// ("Order of the Silver Hand").
var connectors = map[string]bool{"of": true, "the": true, "de": true, "du": true, "von": true, "van": true, "la": true, "le": true}

// Prepositions after which a capitalized phrase is taken for a place.
var placeWords = map[string]bool{
	"in": true, "at": true, "to": true, "from": true, "near": true, "toward": true, "towards": true,
	"into": true, "through": true, "inside": true, "outside": true,
}

// Words that never count as the unit of a number ("40 and" is just 40).
var unitStop = map[string]bool{
	"and": true, "the": true, "for": true, "are": true, "was": true, "were": true, "you": true, "but": true, "not": true,
	"with": true, "that": true, "this": true, "from": true, "into": true, "than": true, "then": true,
}

type token struct {
	text  string
	word  bool
	start bool // the first word of a sentence
	gap   bool // white space only between this token and the previous one
	hash  bool // a word right after '#', as in transcript references
}

// tokenize splits text into words and punctuation, marking sentence starts:
// the beginning of the text or a line, after . ! ? : ; followed by space,
// and after an opening quote.
func tokenize(text string) []token {
	var out []token
	start, gap, hash := true, false, false
	i := 0
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			j := i
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if unicode.IsLetter(r2) || unicode.IsDigit(r2) {
					j += s2
					continue
				}
				// Joiners inside a word: apostrophes and hyphens between
				// letters, separators between digits (3.5, 1,200, 10:30).
				if j+s2 < len(text) {
					r3, _ := utf8.DecodeRuneInString(text[j+s2:])
					prev, _ := utf8.DecodeLastRuneInString(text[:j])
					switch {
					case (r2 == '\'' || r2 == '’' || r2 == '-') && unicode.IsLetter(prev) && unicode.IsLetter(r3):
						j += s2
						continue
					case (r2 == '.' || r2 == ',' || r2 == ':') && unicode.IsDigit(prev) && unicode.IsDigit(r3):
						j += s2
						continue
					}
				}
				break
			}
			out = append(out, token{text: text[i:j], word: true, start: start, gap: gap, hash: hash})
			start, gap, hash = false, false, false
			i = j
			continue
		case r == '\n':
			start, gap = true, false
		case unicode.IsSpace(r):
			gap = len(out) > 0 && !gapBroken(out)
		case r == '.' || r == '!' || r == '?' || r == ':' || r == ';':
			next, _ := utf8.DecodeRuneInString(text[i+size:])
			if i+size >= len(text) || unicode.IsSpace(next) || next == '"' || next == '”' {
				start = true
			}
			out = append(out, token{text: string(r)})
			gap = false
		case r == '"' || r == '“' || r == '”':
			if r != '”' {
				start = true
			}
			out = append(out, token{text: string(r)})
			gap = false
		case r == '#':
			hash = true
			out = append(out, token{text: "#"})
			gap = false
		default:
			// Bullets and dashes at the head of a sentence keep it there.
			out = append(out, token{text: string(r)})
			gap = false
		}
		i += size
	}
	return out
}

func gapBroken(out []token) bool { return !out[len(out)-1].word }

func capitalized(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	return unicode.IsUpper(r)
}

func isNumber(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	return unicode.IsDigit(r)
}

// stampRe matches time stamps such as "[2026-11-21 10:02]", "[2026-11-21]"
// and "(importance 10, 2026-11-21)" that the tick, the retriever and the
// summarizer put in text: bookkeeping, not details of what happened.
var stampRe = regexp.MustCompile(`\[\d{4}-\d{2}-\d{2}[^\]\n]{0,20}\]|\(importance \d+(, [^)\n]{0,20})?\)|\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?`)

// numberWords are the numbers written as words that start or continue a
// number ("forty silver", "two dozen nails", "twenty-five gold"). "one" is
// left out: "no one", "the one you gave" are no amounts.
var numberWords = map[string]bool{
	"two": true, "three": true, "four": true, "five": true, "six": true, "seven": true, "eight": true, "nine": true,
	"ten": true, "eleven": true, "twelve": true, "thirteen": true, "fourteen": true, "fifteen": true, "sixteen": true,
	"seventeen": true, "eighteen": true, "nineteen": true, "twenty": true, "thirty": true, "forty": true, "fifty": true,
	"sixty": true, "seventy": true, "eighty": true, "ninety": true, "hundred": true, "thousand": true, "dozen": true,
	"score": true, "half": true,
}

// numberWord reports whether w (lowercase) is a number written as a word,
// hyphenated tens included ("twenty-five").
func numberWord(w string) bool {
	if numberWords[w] {
		return true
	}
	tens, ones, ok := strings.Cut(w, "-")
	return ok && numberWords[tens] && (numberWords[ones] || ones == "one")
}

// possessives introduce what someone owns: "my sword", "her old cloak".
var possessives = map[string]bool{"my": true, "your": true, "his": true, "her": true, "their": true, "our": true}

// thingStop are words that end the noun phrase after a possessive, or are
// no thing at all ("my own", "on my way", "in my mind").
var thingStop = map[string]bool{
	"own": true, "way": true, "time": true, "mind": true, "word": true, "best": true, "fault": true, "turn": true,
	"self": true, "dear": true, "lord": true, "lady": true, "friend": true, "friends": true, "life": true,
	"and": true, "or": true, "but": true, "the": true, "a": true, "an": true, "is": true, "was": true, "are": true,
	"were": true, "be": true, "been": true, "has": true, "had": true, "have": true, "it": true, "that": true,
	"this": true, "to": true, "of": true, "for": true, "with": true, "by": true, "on": true, "at": true, "in": true,
	"from": true, "into": true, "again": true, "back": true, "too": true, "yesterday": true, "today": true,
	"tomorrow": true, "tonight": true, "now": true, "here": true, "there": true, "last": true, "next": true,
	"very": true, "so": true, "just": true, "still": true,
}

// lowerWord reports whether w is a lowercase word of letters (a hyphen or
// apostrophe inside allowed) of at least two letters.
func lowerWord(w string) bool {
	if utf8.RuneCountInString(w) < 2 {
		return false
	}
	for _, r := range w {
		if !unicode.IsLower(r) && r != '-' && r != '\'' && r != '’' {
			return false
		}
	}
	return true
}

// refWords are words after which a number is a reference, not a detail.
var refWords = map[string]bool{"tick": true, "turn": true, "message": true, "messages": true, "id": true, "importance": true, "compaction": true}

// extract returns the candidates of text in order of first appearance,
// deterministically:
//   - names: runs of capitalized words not at the start of a sentence
//     (words at a sentence start are skipped, so "Tobias left." yields
//     nothing while "I saw Tobias." yields Tobias), joined by single spaces
//     or by connectors such as "of the"; a run right after in, at, to, from,
//     near, into, through… (and an article: "at the Grey Harbor") is a
//     place;
//   - numbers: digit runs (3.5, 1,200 and 10:30 included) with the
//     lowercase word that follows as their unit ("40 gold"); a number
//     without a unit needs two digits or more; dates, time stamps and
//     numbers after tick, turn, message, id or importance are left out;
//     numbers written as words ("forty silver", "two dozen nails",
//     "twenty-five gold") count with their unit only;
//   - things: the lowercase noun after my, your, his, her, their or our,
//     the last of up to three lowercase words ("my old sword" → sword),
//     not words like own, way or mind;
//   - quotes: a string in double quotes of one to four words and at most 40
//     bytes that is not a whole sentence (does not end in . ! or ?).
func extract(text string) []found {
	var out []found
	text = stampRe.ReplaceAllString(text, " ")
	toks := tokenize(text)
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !t.word {
			continue
		}
		if isNumber(t.text) {
			if t.hash || (i > 0 && toks[i-1].word && refWords[strings.ToLower(toks[i-1].text)]) {
				continue
			}
			if i+1 < len(toks) && toks[i+1].word && toks[i+1].gap && unit(toks[i+1].text) {
				out = append(out, found{t.text + " " + toks[i+1].text, KindNumber})
				i++
				continue
			}
			if digits(t.text) >= 2 {
				out = append(out, found{t.text, KindNumber})
			}
			continue
		}
		if lw := strings.ToLower(t.text); numberWord(lw) {
			// A number written as words counts with its unit only: "forty
			// silver", "two dozen nails"; bare "three" is too common.
			j := i + 1
			for j < len(toks) && toks[j].word && toks[j].gap && numberWord(strings.ToLower(toks[j].text)) {
				j++
			}
			if j < len(toks) && toks[j].word && toks[j].gap && unit(toks[j].text) && !numberWord(toks[j].text) {
				words := make([]string, 0, j-i+1)
				for k := i; k <= j; k++ {
					words = append(words, toks[k].text)
				}
				out = append(out, found{strings.Join(words, " "), KindNumber})
				i = j
				continue
			}
		}
		if possessives[strings.ToLower(t.text)] {
			// The noun of "my old sword": the last of the lowercase words
			// that follow, up to a stop word or punctuation.
			noun := ""
			j := i + 1
			for ; j < len(toks) && j <= i+3 && toks[j].word && toks[j].gap && lowerWord(toks[j].text) && !thingStop[toks[j].text] &&
				!possessives[toks[j].text] && !numberWord(toks[j].text); j++ {
				noun = toks[j].text
			}
			if len(noun) >= 3 {
				out = append(out, found{noun, KindThing})
				i = j - 1
			}
			continue
		}
		if !capitalized(t.text) || t.start || capStop[strings.ToLower(t.text)] {
			continue
		}
		j := i + 1
		end := i + 1
		for j < len(toks) && toks[j].word && toks[j].gap {
			w := toks[j].text
			if capitalized(w) && !capStop[strings.ToLower(w)] {
				j++
				end = j
				continue
			}
			if connectors[w] {
				j++
				continue
			}
			break
		}
		words := make([]string, 0, end-i)
		for k := i; k < end; k++ {
			words = append(words, toks[k].text)
		}
		kind := KindName
		if placeBefore(toks, i) {
			kind = KindPlace
		}
		out = append(out, found{strings.Join(words, " "), kind})
		i = end - 1
	}
	out = append(out, quotes(text)...)
	return out
}

// placeBefore reports whether the phrase at toks[i] follows a place
// preposition, directly or through an article ("at the Grey Harbor").
func placeBefore(toks []token, i int) bool {
	for j := i; j > 0 && toks[j].gap && toks[j-1].word; j-- {
		w := strings.ToLower(toks[j-1].text)
		if placeWords[w] {
			return true
		}
		if w != "the" && w != "a" && w != "an" {
			return false
		}
	}
	return false
}

func unit(w string) bool {
	if len(w) < 3 || unitStop[w] {
		return false
	}
	for _, r := range w {
		if !unicode.IsLower(r) {
			return false
		}
	}
	return true
}

func digits(w string) int {
	n := 0
	for _, r := range w {
		if unicode.IsDigit(r) {
			n++
		}
	}
	return n
}

// quotes returns the short quoted strings of text.
func quotes(text string) []found {
	var out []found
	for _, line := range strings.Split(text, "\n") {
		rest := line
		for {
			open := strings.IndexAny(rest, "\"“")
			if open < 0 {
				break
			}
			_, size := utf8.DecodeRuneInString(rest[open:])
			body := rest[open+size:]
			end := strings.IndexAny(body, "\"”")
			if end < 0 {
				break
			}
			q := strings.TrimSpace(body[:end])
			_, esize := utf8.DecodeRuneInString(body[end:])
			rest = body[end+esize:]
			n := len(strings.Fields(q))
			if n == 0 || n > 4 || len(q) > 40 || strings.HasSuffix(q, ".") || strings.HasSuffix(q, "!") || strings.HasSuffix(q, "?") {
				continue
			}
			out = append(out, found{q, KindQuote})
		}
	}
	return out
}

// containsWord reports whether needle occurs in haystack (both lowercase)
// with no letter or digit right before or after it.
func containsWord(haystack, needle string) bool {
	if needle == "" {
		return false
	}
	from := 0
	for {
		i := strings.Index(haystack[from:], needle)
		if i < 0 {
			return false
		}
		i += from
		before, _ := utf8.DecodeLastRuneInString(haystack[:i])
		after, _ := utf8.DecodeRuneInString(haystack[i+len(needle):])
		if !(i > 0 && wordRune(before)) && !(i+len(needle) < len(haystack) && wordRune(after)) {
			return true
		}
		_, size := utf8.DecodeRuneInString(haystack[i:])
		from = i + size
	}
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
