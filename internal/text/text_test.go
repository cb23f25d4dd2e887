package text

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateAndClip(t *testing.T) {
	for _, tt := range []struct {
		in        string
		n         int
		trunc, cl string
	}{
		{"hello", 10, "hello", "hello"},
		{"hello", 5, "hello", "hello"},
		{"hello", 3, "hel", "hel…"},
		{"héllo", 2, "h", "h…"}, // é is two bytes: never cut in half
		{"日本語", 4, "日", "日…"},
		{"abc", 0, "", "…"},
	} {
		if got := Truncate(tt.in, tt.n); got != tt.trunc || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.trunc)
		}
		if got := Clip(tt.in, tt.n); got != tt.cl || !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.cl)
		}
	}
}

func TestClipRunes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 5, "hello"},
		{"hello!", 5, "hell…"},
		{"日本語です", 3, "日本…"},
	} {
		if got := ClipRunes(tt.in, tt.n); got != tt.want {
			t.Errorf("ClipRunes(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestOneLine(t *testing.T) {
	if got := OneLine("  a\n b\t\tc \r\n"); got != "a b c" {
		t.Errorf("OneLine = %q", got)
	}
}

func FuzzClip(f *testing.F) {
	f.Add("héllo wörld", 3)
	f.Add("日本語", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 || !utf8.ValidString(s) {
			return
		}
		got := Truncate(s, n)
		if len(got) > n || !utf8.ValidString(got) || got != s[:len(got)] {
			t.Fatalf("Truncate(%q, %d) = %q", s, n, got)
		}
	})
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4096: "-4,096"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCounts(t *testing.T) {
	m := map[string]int{"sleep": 1, "emergency": 3, "manual": 3, "overflow": 0, "odd": 2}
	for _, c := range []struct {
		order []string
		want  string
	}{
		{nil, "3 emergency, 3 manual, 2 odd, 1 sleep"},
		{[]string{"sleep", "overflow", "emergency"}, "1 sleep, 3 emergency, 3 manual, 2 odd"},
	} {
		if got := Counts(m, c.order...); got != c.want {
			t.Errorf("Counts(order %v) = %q, want %q", c.order, got, c.want)
		}
	}
	if got := Counts(map[string]int{"x": 0}); got != "" {
		t.Errorf("only zeros: %q, want empty", got)
	}
}

// OneLine is the words of a text joined by one space, whether the text
// is already one line or not.
func TestOneLineIsFieldsJoined(t *testing.T) {
	atoms := []string{"a", "sword", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u0085", "\u2028", "\u3000", "é", "\xff", "\xe2\x80", "…", "\v", "\f", "x y"}
	r := rand.New(rand.NewPCG(1, 1))
	texts := []string{"", " ", "a", " a", "a ", "a b", "a  b", "\u00a0a"}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(10) {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		if got, want := OneLine(s), strings.Join(strings.Fields(s), " "); got != want {
			t.Fatalf("OneLine(%q) = %q, want %q", s, got, want)
		}
	}
}
