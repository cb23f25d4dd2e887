//go:build ignore

// synonyms_gen writes synonyms.txt, the offline synonym table of query
// expansion, from the WordNet 3.0 database files (on Debian, the
// wordnet-base package puts them in /usr/share/wordnet):
//
//	go run synonyms_gen.go -wordnet /usr/share/wordnet -o synonyms.txt
//
// Only common single words are kept: a word is common when its senses are
// tagged at least -min times in WordNet's sense-tagged corpus (cntlist.rev).
// A common word's synonyms are the other common words of the synset of its
// most frequent sense in its most frequent part of speech ("dog" the noun,
// not the verb); other senses are dropped, since expanding a query with a
// rare meaning costs more than it finds. Each line is a word and its
// synonyms, sorted.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	dir := flag.String("wordnet", "/usr/share/wordnet", "directory of WordNet's database files")
	out := flag.String("o", "synonyms.txt", "file to write")
	minCount := flag.Int("min", 5, "fewest sense-tagged occurrences of a common word")
	flag.Parse()
	freq, byPOS, err := counts(filepath.Join(*dir, "cntlist.rev"))
	if err != nil {
		log.Fatal(err)
	}
	common := func(w string) bool { return plain(w) && freq[w] >= *minCount }
	syn := map[string]map[string]bool{}
	for i, pos := range []string{"noun", "verb", "adj", "adv"} {
		// The word's own part of speech: the one its tagged senses use most.
		main := func(w string) bool {
			c := byPOS[w]
			if !common(w) || c == nil {
				return false
			}
			return slices.Max(c[:]) == c[i]
		}
		if err := firstSenses(*dir, pos, main, common, syn); err != nil {
			log.Fatal(err)
		}
	}
	words := make([]string, 0, len(syn))
	for w := range syn {
		words = append(words, w)
	}
	slices.Sort(words)
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	fmt.Fprintf(bw, "# Synonyms of common English words from WordNet 3.0 (see NOTICE), made by synonyms_gen.go -min %d.\n", *minCount)
	for _, w := range words {
		ss := make([]string, 0, len(syn[w]))
		for s := range syn[w] {
			ss = append(ss, s)
		}
		slices.Sort(ss)
		fmt.Fprintf(bw, "%s %s\n", w, strings.Join(ss, " "))
	}
	if err := bw.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

// plain reports whether w is one lowercase ASCII word of at least three
// letters.
func plain(w string) bool {
	if len(w) < 3 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// counts sums the sense-tagged occurrences of each lemma, in all and by
// part of speech (noun, verb, adjective, adverb).
func counts(path string) (freq map[string]int, byPOS map[string]*[4]int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	freq, byPOS = map[string]int{}, map[string]*[4]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			continue
		}
		lemma, key, _ := strings.Cut(fs[0], "%")
		n, err := strconv.Atoi(fs[2])
		if err != nil || key == "" {
			continue
		}
		lemma = strings.ToLower(lemma)
		freq[lemma] += n
		// ss_type: 1 noun, 2 verb, 3 adjective, 4 adverb, 5 adjective satellite.
		t := strings.IndexByte("1234", key[0])
		if key[0] == '5' {
			t = 2
		}
		if t < 0 {
			continue
		}
		if byPOS[lemma] == nil {
			byPOS[lemma] = &[4]int{}
		}
		byPOS[lemma][t] += n
	}
	return freq, byPOS, sc.Err()
}

// firstSenses adds, for each lemma of the index of pos that main accepts,
// the common words of its most frequent synset.
func firstSenses(dir, pos string, main, common func(string) bool, syn map[string]map[string]bool) error {
	data, err := os.Open(filepath.Join(dir, "data."+pos))
	if err != nil {
		return err
	}
	defer data.Close()
	idx, err := os.Open(filepath.Join(dir, "index."+pos))
	if err != nil {
		return err
	}
	defer idx.Close()
	sc := bufio.NewScanner(idx)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	line := make([]byte, 1<<16)
	for sc.Scan() {
		text := sc.Text()
		if strings.HasPrefix(text, "  ") {
			continue // licence header
		}
		fs := strings.Fields(text)
		if len(fs) < 4 || !main(fs[0]) {
			continue
		}
		// lemma pos synset_cnt p_cnt [ptr…] sense_cnt tagsense_cnt offsets…
		nSyn, err1 := strconv.Atoi(fs[2])
		nPtr, err2 := strconv.Atoi(fs[3])
		if err1 != nil || err2 != nil || len(fs) < 6+nPtr+nSyn || nSyn == 0 {
			continue
		}
		off, err := strconv.ParseInt(fs[6+nPtr], 10, 64)
		if err != nil {
			continue
		}
		n, err := data.ReadAt(line, off)
		if err != nil && err != io.EOF {
			return err
		}
		rec, _, _ := strings.Cut(string(line[:n]), "\n")
		for _, w := range synsetWords(rec) {
			if w != fs[0] && common(w) {
				if syn[fs[0]] == nil {
					syn[fs[0]] = map[string]bool{}
				}
				syn[fs[0]][w] = true
			}
		}
	}
	return sc.Err()
}

// synsetWords returns the lowercase words of a data file record:
// offset lex_filenum ss_type w_cnt (word lex_id)…
func synsetWords(rec string) []string {
	fs := strings.Fields(rec)
	if len(fs) < 4 {
		return nil
	}
	n, err := strconv.ParseInt(fs[3], 16, 32)
	if err != nil {
		return nil
	}
	var out []string
	for i := 0; i < int(n) && 4+2*i < len(fs); i++ {
		w, _, _ := strings.Cut(fs[4+2*i], "(") // adjective markers: "big(a)"
		out = append(out, strings.ToLower(w))
	}
	return out
}
