package journal

import (
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unsafe"
)

// refStampRe is the stamp unstamped removes, as a regular expression: the
// reference of TestUnstampedMatchesTheRegexp.
var refStampRe = regexp.MustCompile(`(?m)^\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?\]\s*`)

// unstamped removes exactly what the regular expression of a line-leading
// stamp and its blanks matches: fixed texts, and random ones built of
// whole stamps, broken ones, blanks, line breaks and words.
func TestUnstampedMatchesTheRegexp(t *testing.T) {
	texts := []string{
		"", "[", "[2026-11-21 10:02]", "[2026-11-21 10:02] alice says: hi",
		"[2026-11-21T10:02:05]\n[2026-11-21 10:03] two stamps, the first alone on its line",
		"no stamp [2026-11-21 10:02] inside a line", "alice says: hi\n[2026-11-21 10:02]   bob waves\n",
		"[2026-11-21 10:02:5] short seconds", "[2026-11-21 10:02:55 extra]", "[2026-1-21 10:02] short month",
		"[2026-11-21 10:02]\t\r\n\f x", "  [2026-11-21 10:02] indented", "[٢٠٢٦-11-21 10:02] other digits",
	}
	parts := []string{"[2026-11-21 10:02]", "[2026-11-21T23:59:01]", "[2026-11-21 10:0]", "[2026-11-21 10:02:1]",
		"[2026-11-21x10:02]", "[", "]", " ", "\t", "\n", "\r\n", "\f", "alice says: ", "hello", "é", "\xff", "10:02", "-"}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 30000; i++ {
		var b strings.Builder
		for j := rng.IntN(12); j > 0; j-- {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		texts = append(texts, b.String())
	}
	for _, text := range texts {
		if got, want := unstamped(text), refStampRe.ReplaceAllString(text, ""); got != want {
			t.Fatalf("unstamped(%q) = %q, want %q", text, got, want)
		}
	}
}

// A text whose stamps all lead it (a perceived line, most often) is
// returned as its own end, sharing its bytes; one with text before a stamp
// is copied without it.
func TestUnstampedSharesALeadingStampsText(t *testing.T) {
	for _, text := range []string{"[2026-11-21 10:02] alice says: hi", "[2026-11-21 10:02]\n[2026-11-21 10:03]  bob waves", "no stamp at all"} {
		got := unstamped(text)
		if len(got) == 0 || unsafe.StringData(got) != unsafe.StringData(text[len(text)-len(got):]) {
			t.Errorf("unstamped(%q) = %q, a copy instead of the text's end", text, got)
		}
		if n := testing.AllocsPerRun(10, func() { unstamped(text) }); n != 0 {
			t.Errorf("unstamped(%q) allocates %v times", text, n)
		}
	}
	text := "alice says: hi\n[2026-11-21 10:02] bob waves"
	if got := unstamped(text); got != "alice says: hi\nbob waves" {
		t.Errorf("unstamped(%q) = %q", text, got)
	}
}

// round127 rounds as math.Round does every value quantize gives it: each
// float32 in [-127, 127] near the halves, and random ones.
func TestRound127(t *testing.T) {
	var ys []float32
	for k := -127; k <= 127; k++ {
		for _, d := range []float32{-0.5, 0.5} {
			h := float32(k) + d
			ys = append(ys, h, nextafter32(h, -200), nextafter32(h, 200))
		}
		ys = append(ys, float32(k))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 100000; i++ {
		ys = append(ys, (rng.Float32()*2-1)*127)
	}
	for _, y := range ys {
		if y < -127 || y > 127 {
			continue
		}
		if got, want := round127(float64(y)), int8(math.Round(float64(y))); got != want {
			t.Fatalf("round127(%v) = %d, want %d", y, got, want)
		}
	}
}

func nextafter32(x, toward float32) float32 { return math.Nextafter32(x, toward) }
