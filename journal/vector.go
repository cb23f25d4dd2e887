package journal

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"
)

// EncodeVector stores v as little-endian float32 bytes, the format of every
// embedding column.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// DecodeVector reads bytes written by EncodeVector.
func DecodeVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%w: vector of %d bytes is not a float32 array", ErrInvalid, len(b))
	}
	v := make([]float32, len(b)/4)
	decodeInto(v, b)
	return v, nil
}

func decodeInto(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// dot is the inner product of two vectors of equal length; for unit vectors
// it is their cosine similarity. Four accumulators let the CPU overlap the
// multiplications; eight elements a step through fixed-size subslices let
// the compiler drop the bounds checks (a third fewer instructions). Each
// accumulator adds its elements in index order, so the result does not
// depend on the step.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	for len(a) >= 8 && len(b) >= 8 {
		x, y := a[:8:8], b[:8:8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s0 += x[4] * y[4]
		s1 += x[5] * y[5]
		s2 += x[6] * y[6]
		s3 += x[7] * y[7]
		a, b = a[8:], b[8:]
	}
	if len(a) >= 4 && len(b) >= 4 {
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
		a, b = a[4:], b[4:]
	}
	for i := range a {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// sparseVec is a vector's nonzero elements, in order, for dot products
// with dense vectors: a query embedded by the offline embedder sets a few
// dozen of its 256 dimensions.
type sparseVec struct {
	idx []int32
	val []float32
	// head is how many of the elements lie before the last len%4
	// elements of the dense vector, which dot adds to its first
	// accumulator.
	head int
}

// set makes s the nonzero elements of v.
func (s *sparseVec) set(v []float32) {
	s.idx, s.val = s.idx[:0], s.val[:0]
	tail := int32(len(v) &^ 3)
	s.head = 0
	for i, x := range v {
		if x != 0 {
			s.idx = append(s.idx, int32(i))
			s.val = append(s.val, x)
			if int32(i) < tail {
				s.head++
			}
		}
	}
}

// dot is dot(v, b) of the dense vector v that s was set to, to the bit:
// each element is added to the accumulator dot adds it to, in the same
// order. The elements it skips add a zero product to an accumulator, which
// changes nothing (an accumulator starts at +0 and is never −0), so b must
// be finite: a NaN or an infinity times 0 is not 0.
func (s *sparseVec) dot(b []float32) float32 {
	var acc [4]float32
	val := s.val[:len(s.idx)]
	for k, i := range s.idx[:s.head] {
		acc[i&3] += val[k] * b[i]
	}
	for k := s.head; k < len(s.idx); k++ {
		acc[0] += val[k] * b[s.idx[k]]
	}
	return acc[0] + acc[1] + acc[2] + acc[3]
}

// finite reports whether every element of v is a finite number.
func finite(v []float32) bool {
	for _, x := range v {
		if x-x != 0 {
			return false
		}
	}
	return true
}

// unit scales v to length 1 in place; the zero vector stays zero. Remote
// embedders usually return unit vectors already, but cosine must not depend
// on it.
func unit(v []float32) {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 || math.Abs(n-1) < 1e-6 {
		return
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= inv
	}
}

// textHash keys the embedding cache: the SHA-256 of the exact text embedded.
func textHash(s string) string {
	return hashBytes([]byte(s))
}

// hashBytes is the SHA-256 of b in hex.
func hashBytes(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// ContentHash is the hash stored with a memory to find exact duplicates: the
// SHA-256 of its content lowercased, with punctuation dropped and whitespace
// collapsed, so "Alice lost her sword." and "alice lost her sword" agree.
func ContentHash(content string) string {
	var buf [256]byte
	return hashBytes(appendNormalized(buf[:0], content))
}

func normalizeContent(s string) string {
	return string(appendNormalized(nil, s))
}

// appendNormalized appends s normalized to dst: lowercased, its words (runs
// of letters and digits) joined by one space. It is
// strings.Join(strings.FieldsFunc(strings.ToLower(s), not a letter or
// digit), " ") written rune by rune (strings.ToLower maps each rune with
// unicode.ToLower, an invalid byte to U+FFFD, which ends a word).
func appendNormalized(dst []byte, s string) []byte {
	start, gap := len(dst), false
	for _, r := range s {
		r = unicode.ToLower(r)
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			gap = len(dst) > start
			continue
		}
		if gap {
			dst = append(dst, ' ')
			gap = false
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// fingerprint is a 64-bit hash of normalized content, kept in the in-memory
// index to merge results that say the same thing.
func fingerprint(s string) uint64 {
	var buf [256]byte
	h := sha256.Sum256(appendNormalized(buf[:0], s))
	return binary.LittleEndian.Uint64(h[:8])
}
