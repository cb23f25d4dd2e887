package journal

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Importance words: what makes a perception worth remembering for an NPC.
var (
	stakesWords = words(`die dies died dead death kill killed killing murder murdered attack attacked
		steal stole stolen thief rob robbed lost lose losing betray betrayed betrayal quest promise promised
		swear swore vow owe owes owed debt pay paid gold coins coin silver reward bounty sword axe bow shield
		armor armour ring amulet key map secret love loves hate hates marry married wedding baby born help
		urgent danger dangerous war king queen dragon curse cursed poison poisoned sick wounded fire burned
		burning missing kidnapped prison escape spy treasure contract deal trade buy sell sold forge repair
		remember forget never always name birthday funeral job work moved adopt adoption`)
	requestWords = words(`please need needs want wants could would will can must should find bring
		fetch deliver meet tomorrow tonight later`)
	// Words of self-disclosure: who someone is, where they live, whom they
	// love — what an NPC is expected to remember about people.
	disclosureWords = words(`live lives lived moved home name job work works worked married wife husband
		son daughter mother father brother sister family kids children born birthday friend friends
		pet dog cat school studied adopted adopt pregnant divorced engaged grandmother grandfather
		favorite favourite hometown age years`)
	smallTalk = words(`hello hi hey greetings morning evening bye goodbye farewell thanks thank ok okay
		yes no hmm lol nice cool`)
)

// The classes of a word Importance weighs, in wordClasses: at most one of
// stakes, request, small talk and disclosure (in that order of precedence,
// for a word in several lists), and selfWord for a word by which someone
// speaks of themselves.
const (
	classStakes uint8 = 1 + iota
	classRequest
	classSmall
	classDisclosure
	classMask uint8 = 7
	selfWord  uint8 = 8
)

// wordClasses holds every word of the lists above with its class, so that
// Importance looks each word up once.
var wordClasses = func() map[string]uint8 {
	m := map[string]uint8{}
	lists := []map[string]bool{stakesWords, requestWords, smallTalk, disclosureWords}
	for i := len(lists) - 1; i >= 0; i-- { // the first list wins
		for w := range lists[i] {
			m[w] = uint8(i) + classStakes
		}
	}
	for _, w := range []string{"i", "my", "i'm", "we", "our"} {
		m[w] |= selfWord
	}
	return m
}()

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// Heavy event kinds matter more than what is said about them.
var kindWeight = map[string]int{
	"attack": 3, "death": 4, "die": 4, "give": 2, "steal": 3, "trade": 2, "quest": 3, "arrive": 0,
	"leave": 0, "say": 0, "emote": 0, "whisper": 1, "system": 1,
}

// Importance scores text perceived as an event of kind on 1–10: stakes
// (violence, loss, debts, promises, valuables), requests, names and numbers
// raise it; small talk lowers it. It is the heuristic used when no model
// scores an entry, and it is deterministic.
func Importance(kind, text string) int {
	score := 2 + kindWeight[strings.ToLower(kind)]
	var stakes, requests, small, names, numbers, disclosures, self int
	// The fields of text are its runs of letters, digits and apostrophes
	// (as strings.FieldsFunc splits it), read in place.
	fields := 0
	var buf [32]byte
	for rest := text; ; fields++ {
		var f string
		if f, rest = nextField(rest); f == "" {
			break
		}
		i := fields
		t := strings.Trim(f, "'")
		var class uint8
		var isI bool
		if low, ok := lowerASCII(&buf, t); ok {
			class, isI = wordClasses[string(low)], string(low) == "i"
		} else {
			w := strings.ToLower(t)
			class, isI = wordClasses[w], w == "i"
		}
		switch class & classMask {
		case classStakes:
			stakes++
		case classRequest:
			requests++
		case classSmall:
			small++
		case classDisclosure:
			disclosures++
		}
		if class&selfWord != 0 {
			self++
		}
		first, size := utf8.DecodeRuneInString(f)
		if unicode.IsDigit(first) {
			numbers++
		} else if i > 0 && unicode.IsUpper(first) && len(f) > size && !isI {
			names++
		}
	}
	score += min(stakes, 3) * 2
	score += min(requests, 2)
	score += min(names, 2)
	score += min(numbers, 1)
	if self > 0 && disclosures > 0 { // someone telling about themselves
		score += 1 + min(disclosures, 2)
	}
	if strings.Contains(text, "!") {
		score++
	}
	if fields > 0 && small*2 >= fields {
		score -= 2
	}
	return max(1, min(10, score))
}

// nextField returns the first run of letters, digits and apostrophes in s
// and what follows it; an empty field when s holds none.
func nextField(s string) (field, rest string) {
	start := -1
	for i := 0; i < len(s); {
		var in bool
		size := 1
		if c := s[i]; c < utf8.RuneSelf {
			in = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '\''
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			in = unicode.IsLetter(r) || unicode.IsDigit(r)
		}
		switch {
		case in && start < 0:
			start = i
		case !in && start >= 0:
			return s[start:i], s[i:]
		}
		i += size
	}
	if start < 0 {
		return "", ""
	}
	return s[start:], ""
}

// lowerASCII writes the ASCII word w lower-cased into buf and returns it;
// ok is false when w is not ASCII or is longer than buf.
func lowerASCII(buf *[32]byte, w string) (low []byte, ok bool) {
	if len(w) > len(buf) {
		return nil, false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= utf8.RuneSelf {
			return nil, false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return buf[:len(w)], true
}
