package journal

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
)

// ContentHash, fingerprint and normalizeContent normalize as ToLower,
// FieldsFunc and Join did, on texts of any case, Unicode letters, digits,
// punctuation, white space and invalid UTF-8.
func TestNormalizeIsFieldsJoined(t *testing.T) {
	atoms := []string{"Alice", "LOST", "her", "sword", ".", ", ", "  ", "\n", "42", "İ", "Σ", "ß", "Ⓐ", "١٢", "é", "\xff", "\xe2\x80", "—", "'s", "_", "\u00a0", "\u212a"}
	r := rand.New(rand.NewPCG(4, 5))
	texts := []string{"", " ", ".", "a", strings.Repeat("long words here ", 40)}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		want := strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }), " ")
		if got := normalizeContent(s); got != want {
			t.Fatalf("normalizeContent(%q) = %q, want %q", s, got, want)
		}
		if got := ContentHash(s); got != textHash(want) {
			t.Fatalf("ContentHash(%q) is not the hash of %q", s, want)
		}
		if h := sha256.Sum256([]byte(want)); fingerprint(s) != binary.LittleEndian.Uint64(h[:8]) {
			t.Fatalf("fingerprint(%q) is not that of %q", s, want)
		}
	}
}
