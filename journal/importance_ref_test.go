package journal

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// refImportance is Importance as it was written with strings.FieldsFunc,
// the reference of TestImportanceMatchesFieldsFunc.
func refImportance(kind, text string) int {
	score := 2 + kindWeight[strings.ToLower(kind)]
	fields := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' })
	var stakes, requests, small, names, numbers, disclosures, self int
	for i, f := range fields {
		w := strings.ToLower(strings.Trim(f, "'"))
		switch {
		case stakesWords[w]:
			stakes++
		case requestWords[w]:
			requests++
		case smallTalk[w]:
			small++
		case disclosureWords[w]:
			disclosures++
		}
		if w == "i" || w == "my" || w == "i'm" || w == "we" || w == "our" {
			self++
		}
		first, size := utf8.DecodeRuneInString(f)
		if unicode.IsDigit(first) {
			numbers++
		} else if i > 0 && unicode.IsUpper(first) && len(f) > size && w != "i" {
			names++
		}
	}
	score += min(stakes, 3) * 2
	score += min(requests, 2)
	score += min(names, 2)
	score += min(numbers, 1)
	if self > 0 && disclosures > 0 {
		score += 1 + min(disclosures, 2)
	}
	if strings.Contains(text, "!") {
		score++
	}
	if len(fields) > 0 && small*2 >= len(fields) {
		score -= 2
	}
	return max(1, min(10, score))
}

// Importance reads its fields in place and scores every text as the
// FieldsFunc version did: fixed texts and random ones built of the words it
// weighs, names, numbers, apostrophes, punctuation, non-ASCII letters and
// invalid UTF-8.
func TestImportanceMatchesFieldsFunc(t *testing.T) {
	texts := []string{"", " ", "'", "''", "!", "I", "i'm here", "Hello, Mara! I owe you 30 gold.", "'quoted' words'", "ÉTÉ Ünter naïve", "a\xffb", "\xff", "My sword. Please help!"}
	var pool []string
	for _, m := range []map[string]bool{stakesWords, requestWords, smallTalk, disclosureWords} {
		for w := range m {
			pool = append(pool, w)
		}
	}
	pool = append(pool, "Mara", "Tobin", "I", "my", "we", "our", "i'm", "42", "3rd", "'tis", "don't", "É", "ß", "İstanbul", "\xff", "’", "…", ",", "!", "?", "--", "\t", "\n",
		"PROMISED", "MuRdEr", "I'M", "supercalifragilisticexpialidociousness", "Supercalifragilisticexpialidocious'd")
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 30000; i++ {
		var b strings.Builder
		for j := rng.IntN(14); j > 0; j-- {
			w := pool[rng.IntN(len(pool))]
			if rng.IntN(4) == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
			b.WriteString([]string{" ", "", ", ", "'", "! ", ".", "'s "}[rng.IntN(7)])
		}
		texts = append(texts, b.String())
	}
	kinds := []string{"say", "attack", "GIVE", "unknown", ""}
	for i, text := range texts {
		kind := kinds[i%len(kinds)]
		if got, want := Importance(kind, text), refImportance(kind, text); got != want {
			t.Fatalf("Importance(%q, %q) = %d, want %d", kind, text, got, want)
		}
	}
}
