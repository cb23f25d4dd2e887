package llm

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The offline embedder as it was before its scratch-free rewrite, verbatim
// but for the names: the reference the rewrite must match bit for bit,
// since stored vectors are compared with new ones under the same model name.

func (e *OfflineEmbedder) refWeightedVector(text string, weight func(word string) float64) []float32 {
	v := make([]float32, e.dims)
	prev, prevW := "", 0.0
	for _, w := range refOfflineWords(text) {
		if offlineStopWords[w] {
			prev = ""
			continue
		}
		ww := 1.0
		if weight != nil {
			ww = max(0, weight(w))
		}
		st := refStem(w)
		e.refAdd(v, "w\x00"+st, weightStem*ww)
		if prev != "" {
			e.refAdd(v, "b\x00"+prev+"\x00"+st, weightBigram*math.Sqrt(ww*prevW))
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
			e.refAdd(v, "t\x00"+string(r[i:i+3]), tw)
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

func (e *OfflineEmbedder) refAdd(v []float32, f string, w float64) {
	h := refFnv64a(f)
	i := int(h % uint64(e.dims))
	if h>>63 == 1 {
		v[i] -= float32(w)
	} else {
		v[i] += float32(w)
	}
}

func refFnv64a(s string) uint64 {
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

var refApostrophes = strings.NewReplacer("'", "", "’", "")

func refOfflineWords(text string) []string {
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
			w = refApostrophes.Replace(w)
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

func refStem(w string) string {
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
		w = refUndouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && len(w) > 4:
		w = refUndouble(w[:len(w)-2])
	case strings.HasSuffix(w, "ly") && len(w) > 5:
		w = w[:len(w)-2]
	}
	if strings.HasSuffix(w, "e") && len(w) > 3 {
		w = w[:len(w)-1]
	}
	return w
}

func refUndouble(w string) string {
	n := len(w)
	if n >= 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeioulsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}
