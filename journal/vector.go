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

// sparse8 is a vector of int8 codes' nonzero codes, in order, for dot
// products with dense codes: a query embedded by the offline embedder sets
// a few dozen of its 256 dimensions.
type sparse8 struct {
	idx []int32
	val []int32
}

// set makes s the nonzero codes of v.
func (s *sparse8) set(v []int8) {
	s.idx, s.val = s.idx[:0], s.val[:0]
	for i, c := range v {
		if c != 0 {
			s.idx = append(s.idx, int32(i))
			s.val = append(s.val, int32(c))
		}
	}
}

// dot is dot8(v, b) of the codes v that s was set to: a sum of integers,
// the same in any order.
func (s *sparse8) dot(b []int8) int32 {
	var s0, s1 int32
	val := s.val[:len(s.idx)]
	k := 0
	for ; k+1 < len(s.idx); k += 2 {
		s0 += val[k] * int32(b[s.idx[k]])
		s1 += val[k+1] * int32(b[s.idx[k+1]])
	}
	if k < len(s.idx) {
		s0 += val[k] * int32(b[s.idx[k]])
	}
	return s0 + s1
}

// bytes is what s holds.
func (s *sparse8) bytes() int64 {
	return int64(cap(s.idx)+cap(s.val)) * 4
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
