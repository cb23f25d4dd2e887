package llm

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Offline embedder defaults and limits.
const (
	// OfflineEmbedderName prefixes the model name of every offline
	// embedding; the dimension count follows it ("npcd-offline-v1-256").
	// The version changes whenever the features change, so vectors made by
	// an older binary are never compared with new ones.
	OfflineEmbedderName = "npcd-offline-v1"
	// DefaultOfflineDims is the vector size of NewOfflineEmbedder(0).
	DefaultOfflineDims = 256
	minOfflineDims     = 32
	maxOfflineDims     = 4096
)

// Feature weights, before L2 normalization. A word's stem carries most of
// its weight; the whole-phrase bigram rewards texts that keep words
// together; character trigrams let a typo or an unknown inflection still
// share most of a word.
const (
	weightStem     = 1.0
	weightBigram   = 0.6
	weightTrigrams = 0.45 // shared by all trigrams of one word
)

// OfflineEmbedder is a deterministic embedder that needs no model, key or
// network: every text is hashed into a fixed-size vector from its word
// stems (after dropping English stop words and stripping common suffixes,
// so "swords", "sword's" and "sword" agree), the bigrams of neighbouring
// stems, and the character trigrams of each word. Features are spread over
// the dimensions with signed feature hashing and the vector is L2-normalized,
// so the dot product of two vectors is their cosine similarity.
//
// What it is: a lexical similarity measure that tolerates word forms,
// word order within a phrase, and small typos. What it is not: a language
// model. It knows no synonyms and no meaning — "blade" and "sword" are as
// unrelated to it as "blade" and "turnip" — and it favours English, since
// its stop words and suffix rules are English. For semantic recall configure
// an embedding endpoint (Client implements Embedder).
//
// The same text always yields the same vector, on every machine and in every
// version that keeps Model's name. An OfflineEmbedder is safe for concurrent
// use; its zero value is not usable, build one with NewOfflineEmbedder.
type OfflineEmbedder struct {
	dims int
}

var _ Embedder = (*OfflineEmbedder)(nil)

// NewOfflineEmbedder returns an offline embedder producing vectors of dims
// dimensions; 0 selects DefaultOfflineDims. dims must lie in [32, 4096].
func NewOfflineEmbedder(dims int) (*OfflineEmbedder, error) {
	if dims == 0 {
		dims = DefaultOfflineDims
	}
	if dims < minOfflineDims || dims > maxOfflineDims {
		return nil, fmt.Errorf("llm: offline embedder dims %d: must be between %d and %d", dims, minOfflineDims, maxOfflineDims)
	}
	return &OfflineEmbedder{dims: dims}, nil
}

// Model names the embedding space, dimension count included: vectors are
// comparable only when their model names are equal.
func (e *OfflineEmbedder) Model() string { return fmt.Sprintf("%s-%d", OfflineEmbedderName, e.dims) }

// Dims returns the vector size.
func (e *OfflineEmbedder) Dims() int { return e.dims }

// Local reports that vectors are computed in process, in microseconds: they
// cost less to compute again than to store and read back, so callers need
// not cache them.
func (e *OfflineEmbedder) Local() bool { return true }

// Embed returns one vector per text, in order. A text without any content
// word (empty, or only stop words and punctuation) gets the zero vector,
// which is similar to nothing. It fails only when ctx is done.
func (e *OfflineEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, &Error{Code: CodeTimeout, Err: err}
			}
		}
		out[i] = e.Vector(t)
	}
	return out, nil
}

// Vector embeds one text.
func (e *OfflineEmbedder) Vector(text string) []float32 { return e.WeightedVector(text, nil) }

// WeightedVector embeds text with every word's features scaled by
// weight(word), where word is lowercase with apostrophes removed. A
// searcher uses it for queries, passing the rarity of each word in what is
// searched (its IDF): the lexical similarity of rare words then counts for
// more than that of names and words said every day. A word of weight 0 (or
// less) adds nothing; a nil weight counts every word once.
func (e *OfflineEmbedder) WeightedVector(text string, weight func(word string) float64) []float32 {
	v := make([]float32, e.dims)
	prev, prevW := "", 0.0
	for _, w := range offlineWords(text) {
		if offlineStopWords[w] {
			prev = ""
			continue
		}
		ww := 1.0
		if weight != nil {
			ww = max(0, weight(w))
		}
		st := Stem(w)
		e.add(v, "w\x00"+st, weightStem*ww)
		if prev != "" {
			e.add(v, "b\x00"+prev+"\x00"+st, weightBigram*math.Sqrt(ww*prevW))
		}
		prev, prevW = st, ww
		padded := "<" + w + ">"
		n := utf8.RuneCountInString(padded) - 2
		if n < 1 {
			continue
		}
		tw := ww * weightTrigrams / math.Sqrt(float64(n))
		r := []rune(padded)
		for i := 0; i+3 <= len(r); i++ {
			e.add(v, "t\x00"+string(r[i:i+3]), tw)
		}
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if norm == 0 {
		return v
	}
	inv := float32(1 / math.Sqrt(norm))
	for i := range v {
		v[i] *= inv
	}
	return v
}

// add hashes feature f into v with a sign taken from the hash, so collisions
// cancel out on average instead of piling up.
func (e *OfflineEmbedder) add(v []float32, f string, w float64) {
	h := fnv64a(f)
	i := int(h % uint64(e.dims))
	if h>>63 == 1 {
		v[i] -= float32(w)
	} else {
		v[i] += float32(w)
	}
}

func fnv64a(s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	// FNV's high bits mix poorly for short keys; finish with a
	// murmur-style avalanche so both the index and the sign are uniform.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// offlineWords lowercases text and splits it into words of letters and
// digits. Apostrophes inside a word are dropped and a possessive "'s" is
// cut, so "Alice's" and "Alice" agree and "don't" becomes "dont".
// apostrophes drops the apostrophes left inside a word.
var apostrophes = strings.NewReplacer("'", "", "’", "")

func offlineWords(text string) []string {
	var out []string
	var b strings.Builder
	flush := func() {
		if b.Len() == 0 {
			return
		}
		w := b.String()
		b.Reset()
		if strings.HasSuffix(w, "'s") || strings.HasSuffix(w, "’s") {
			w = strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "’s")
		}
		if strings.ContainsAny(w, "'’") {
			w = apostrophes.Replace(w)
		}
		if w != "" {
			out = append(out, w)
		}
	}
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case (r == '\'' || r == '’') && b.Len() > 0:
			b.WriteRune(r)
		default:
			flush()
		}
	}
	flush()
	return out
}

// Stem strips common English inflectional suffixes from a lowercase word
// ("swords" → "sword", "running" → "run", "painted" → "paint", "stories" →
// "story") and a final "e", so that forms of one word share a stem
// ("make", "making" → "mak"). It is deliberately light: it never looks
// words up and it leaves short words alone, trading some missed matches for
// never merging unrelated words.
func Stem(w string) string {
	if utf8.RuneCountInString(w) <= 3 {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
	case strings.HasSuffix(w, "s"):
		w = w[:len(w)-1]
	}
	switch {
	case strings.HasSuffix(w, "ied") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "ing") && len(w) > 5:
		w = undouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && len(w) > 4:
		w = undouble(w[:len(w)-2])
	case strings.HasSuffix(w, "ly") && len(w) > 5:
		w = w[:len(w)-2]
	}
	if strings.HasSuffix(w, "e") && len(w) > 3 {
		w = w[:len(w)-1]
	}
	return w
}

// undouble turns "runn" into "run" and "stopp" into "stop", but keeps
// "ll", "ss" and "zz", which English doubles in the stem itself ("fill").
func undouble(w string) string {
	n := len(w)
	if n >= 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeioulsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

// offlineStopWords are English function words, too frequent to say what a
// text is about.
var offlineStopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all also am an and any are as at be
		because been before being below between both but by can could did do does doing done down during each
		few for from further had has have having he her here hers herself him himself his how i if in into is it
		its itself just let lets me more most my myself no nor not now of off on once only or other ought our ours
		ourselves out over own same she should so some such than that thats the their theirs them themselves then
		there theres these they this those through to too under until up very was we were what when where which
		while who whom why will with would you your yours yourself yourselves im ive id ill youre youve youll
		hes shes its were theyre weve theyve dont doesnt didnt isnt wasnt arent werent cant couldnt wont wouldnt
		shouldnt hasnt havent hadnt oh ok okay yeah yes hey hi really so just got get gets getting thing things
		much many lot lots well also said says say`) {
		m[w] = true
	}
	return m
}()
