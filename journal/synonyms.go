package journal

import (
	_ "embed"
	"slices"
	"strings"
	"sync"
)

// synonymsText is the offline synonym table: common English words with the
// other common words of their most frequent WordNet sense. Regenerate it
// with `go generate ./journal/` on a machine with WordNet's database files
// (Debian: the wordnet-base package); see synonyms_gen.go and NOTICE.
//
//go:generate go run synonyms_gen.go -wordnet /usr/share/wordnet -o synonyms.txt
//go:embed synonyms.txt
var synonymsText string

// synonyms maps an index key (termKey) to the keys of its synonyms, stop
// words left out, parsed once on first use.
var synonyms = sync.OnceValue(func() map[string][]string {
	return parseSynonyms(synonymsText)
})

// parseSynonyms reads lines of a word and its synonyms; lines starting
// with # are comments. Words that share a key (forms of one word) merge
// their synonyms.
func parseSynonyms(text string) map[string][]string {
	out := map[string][]string{}
	for line := range strings.Lines(text) {
		fs := strings.Fields(line)
		if len(fs) < 2 || strings.HasPrefix(fs[0], "#") || !searchable(fs[0]) {
			continue
		}
		k := termKey(fs[0])
		for _, s := range fs[1:] {
			if sk := termKey(s); searchable(s) && sk != k && !slices.Contains(out[k], sk) {
				out[k] = append(out[k], sk)
			}
		}
	}
	return out
}
