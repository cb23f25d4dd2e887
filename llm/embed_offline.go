package llm

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
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
//
// Beyond the returned vector it allocates nothing but the words handed to
// weight that differ from their spelling in text (capitals, apostrophes)
// and words too long for its stack buffer: features are hashed as they are
// read, never built as strings.
func (e *OfflineEmbedder) WeightedVector(text string, weight func(word string) float64) []float32 {
	return e.AppendWeightedVector(nil, text, weight)
}

// AppendWeightedVector is WeightedVector appending the vector to dst, whose
// spare capacity it reuses: a searcher embedding one query after another
// into the same buffer allocates nothing.
func (e *OfflineEmbedder) AppendWeightedVector(dst []float32, text string, weight func(word string) float64) []float32 {
	dst = slices.Grow(dst, e.dims)
	v := dst[len(dst) : len(dst)+e.dims]
	clear(v)
	dst = dst[:len(dst)+e.dims]
	var buf [64]byte
	scratch := buf[:0]
	s := offlineScanner{text: text}
	hasPrev, prevW := false, 0.0
	var prevH uint64 // the bigram's hash state after "b\x00"+prev+"\x00"
	for {
		padded, same, ok := s.next(scratch)
		if !ok {
			break
		}
		scratch = padded[:0]
		w := padded[1 : len(padded)-1]
		if offlineStopWords[string(w)] {
			hasPrev = false
			continue
		}
		ww := 1.0
		if weight != nil {
			var word string
			if same {
				word = s.text[s.start:s.end]
			} else {
				word = string(w)
			}
			ww = max(0, weight(word))
		}
		n := utf8.RuneCount(w)
		sn, sy := stemLen(w, n)
		// Stem(w) is w[:sn], followed by "y" when sy.
		e.addHash(v, fnvStem(fnvBytes(fnvOffset, "w\x00"), w[:sn], sy), weightStem*ww)
		if hasPrev {
			e.addHash(v, fnvStem(prevH, w[:sn], sy), weightBigram*math.Sqrt(ww*prevW))
		}
		hasPrev, prevW = sn > 0 || sy, ww
		prevH = fnvBytes(fnvStem(fnvBytes(fnvOffset, "b\x00"), w[:sn], sy), "\x00")
		if n < 1 {
			continue
		}
		tw := ww * weightTrigrams / math.Sqrt(float64(n))
		// The trigrams of padded's runes: from the start of rune i to the
		// start of rune i+3 (or the end).
		var starts [3]int // the starts of the last three runes read
		read := 0
		for i := 0; i <= len(padded); {
			if read >= 3 {
				e.addHash(v, fnvBytes(fnvBytes(fnvOffset, "t\x00"), padded[starts[read%3]:i]), tw)
			}
			if i == len(padded) {
				break
			}
			starts[read%3] = i
			read++
			_, size := utf8.DecodeRune(padded[i:])
			i += size
		}
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if norm == 0 {
		return dst
	}
	inv := float32(1 / math.Sqrt(norm))
	for i := range v {
		v[i] *= inv
	}
	return dst
}

// addHash adds w to v at the dimension of the FNV state h (see fnvFinish),
// with a sign taken from the hash, so collisions cancel out on average
// instead of piling up.
func (e *OfflineEmbedder) addHash(v []float32, h uint64, w float64) {
	h = fnvFinish(h)
	i := int(h % uint64(e.dims))
	if h>>63 == 1 {
		v[i] -= float32(w)
	} else {
		v[i] += float32(w)
	}
}

// A feature's hash is 64-bit FNV-1a over its bytes, finished by fnvFinish;
// it is computed piece by piece, so a feature is never built as a string.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvBytes continues the FNV-1a state h over s.
func fnvBytes[S string | []byte](h uint64, s S) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// fnvStem continues h over the stem stem, followed by "y" when y.
func fnvStem(h uint64, stem []byte, y bool) uint64 {
	h = fnvBytes(h, stem)
	if y {
		h = fnvBytes(h, "y")
	}
	return h
}

// fnvFinish ends a hash. FNV's high bits mix poorly for short keys; a
// murmur-style avalanche makes both the index and the sign uniform.
func fnvFinish(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// offlineScanner lowercases text and splits it into words of letters and
// digits. Apostrophes inside a word are dropped and a possessive "'s" is
// cut, so "Alice's" and "Alice" agree and "don't" becomes "dont".
type offlineScanner struct {
	text       string
	pos        int
	start, end int // the bytes of text the last word was read from
}

// next returns the next word between '<' and '>', written over buf's
// capacity. same reports whether the word is spelt exactly as
// text[s.start:s.end] (no capital, no apostrophe).
func (s *offlineScanner) next(buf []byte) (padded []byte, same, ok bool) {
	for s.pos < len(s.text) {
		b := buf[:0]
		b = append(b, '<')
		s.start = -1
		same = true
		apos := false
		// A word ends at the first rune that is neither a letter, a digit
		// nor an apostrophe after one of them; that rune is consumed.
		for s.pos < len(s.text) {
			r, size := utf8.DecodeRuneInString(s.text[s.pos:])
			at := s.pos
			s.pos += size
			if r < utf8.RuneSelf && ('a' <= r && r <= 'z' || '0' <= r && r <= '9') {
				// Lowercase ASCII letters and digits: unicode's answer, sooner.
			} else if unicode.IsLetter(r) || unicode.IsDigit(r) {
				if l := unicode.ToLower(r); l != r {
					r, same = l, false
				}
			} else if (r == '\'' || r == '’') && len(b) > 1 {
				apos, same = true, false
			} else {
				break
			}
			if s.start < 0 {
				s.start = at
			}
			s.end = s.pos
			b = utf8.AppendRune(b, r)
		}
		buf = b
		if len(b) == 1 {
			continue
		}
		w := b[1:]
		if apos {
			if bytes.HasSuffix(w, []byte("'s")) || bytes.HasSuffix(w, []byte("’s")) {
				w = bytes.TrimSuffix(bytes.TrimSuffix(w, []byte("'s")), []byte("’s"))
			}
			// Drop the apostrophes left, in place.
			k := 0
			for i := 0; i < len(w); {
				switch {
				case w[i] == '\'':
					i++
				case bytes.HasPrefix(w[i:], []byte("’")):
					i += len("’")
				default:
					w[k] = w[i]
					k, i = k+1, i+1
				}
			}
			w = w[:k]
		}
		if len(w) == 0 {
			continue
		}
		b = append(b[:1+len(w)], '>')
		return b, same, true
	}
	return nil, false, false
}

// Stem strips common English inflectional suffixes from a lowercase word
// ("swords" → "sword", "running" → "run", "painted" → "paint", "stories" →
// "story") and a final "e", so that forms of one word share a stem
// ("make", "making" → "mak"). It is deliberately light: it never looks
// words up and it leaves short words alone, trading some missed matches for
// never merging unrelated words.
func Stem(w string) string {
	n, y := stemLen(w, utf8.RuneCountInString(w))
	if y {
		return w[:n] + "y"
	}
	return w[:n]
}

// stemLen is Stem without building the stem: Stem(w) is w[:n] followed by
// "y" when y. runes is w's rune count.
func stemLen[S string | []byte](w S, runes int) (n int, y bool) {
	n = len(w)
	if runes <= 3 {
		return n, false
	}
	// The stem so far is w[:n] followed by "y" when y; its length is l.
	l := func() int {
		if y {
			return n + 1
		}
		return n
	}
	has := func(suffix string) bool {
		k := l() - len(suffix)
		if k < 0 {
			return false
		}
		for i := 0; i < len(suffix); i++ {
			c := byte('y')
			if j := k + i; j < n {
				c = w[j]
			}
			if c != suffix[i] {
				return false
			}
		}
		return true
	}
	// The first switch starts from w itself (y is false).
	switch {
	case has("ies") && n > 4:
		n, y = n-3, true
	case has("sses"):
		n -= 2
	case has("ss"), has("us"), has("is"):
	case has("s"):
		n--
	}
	// When y the stem ends in "y": of the endings below only "ly" can match.
	switch {
	case has("ied") && l() > 4:
		n, y = n-3, true
	case has("ing") && l() > 5:
		n = undoubleLen(w, n-3)
	case has("ed") && l() > 4:
		n = undoubleLen(w, n-2)
	case has("ly") && l() > 5:
		if y {
			n, y = n-1, false
		} else {
			n -= 2
		}
	}
	if has("e") && l() > 3 {
		n-- // y is false: the stem ends in "e"
	}
	return n, y
}

// undoubleLen turns "runn" into "run" and "stopp" into "stop", but keeps
// "ll", "ss" and "zz", which English doubles in the stem itself ("fill"):
// it returns the length of w[:n] undoubled.
func undoubleLen[S string | []byte](w S, n int) int {
	if n >= 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeioulsz", rune(w[n-1])) {
		return n - 1
	}
	return n
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
