package text

import (
	"regexp"
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

// OneLine agrees with joining strings.Fields, on white space of every kind
// (ASCII, Latin-1, Unicode), invalid UTF-8 and texts already on one line.
func TestOneLineMatchesFields(t *testing.T) {
	pieces := []string{"a", "Zoë", " ", " ", "  ", "\t", "\n", "\r", "\v", "\f", "\u0085", "\u00a0", "\u2003", "\u3000", "\u200b",
		"\xff", "\xc2", "\xe2\x80", "x", "日本", ".", "\x00", "\x1c"}
	var gen func(prefix string, depth int)
	n := 0
	gen = func(prefix string, depth int) {
		n++
		if got, want := OneLine(prefix), strings.Join(strings.Fields(prefix), " "); got != want {
			t.Fatalf("OneLine(%q) = %q, want %q", prefix, got, want)
		}
		if depth == 0 {
			return
		}
		for _, p := range pieces {
			gen(prefix+p, depth-1)
		}
	}
	gen("", 4)
	if n < 10000 {
		t.Fatalf("only %d texts", n)
	}
}

func BenchmarkOneLine(b *testing.B) {
	s := "Round 12: have you seen my sword, brom-3? I looked everywhere in the forge."
	for i := 0; i < b.N; i++ {
		OneLine(s)
	}
}

func TestFoldPrefix(t *testing.T) {
	for _, c := range []struct {
		s    string
		i    int
		word string
		end  int
		ok   bool
	}{
		{"I'LL be back", 0, "i'll", 4, true},
		{"by Tomorrow", 3, "tomorrow", 11, true},
		{"yourſ", 0, "yours", len("yourſ"), true},
		{"\u212aeep", 0, "keep", len("\u212aeep"), true},
		{"dea", 0, "deal", 0, false},
		{"dial", 0, "deal", 0, false},
		{"Ì'll", 0, "i'll", 0, false},
	} {
		end, ok := FoldPrefix(c.s, c.i, c.word)
		if end != c.end || ok != c.ok {
			t.Errorf("FoldPrefix(%q, %d, %q) = %d, %v; want %d, %v", c.s, c.i, c.word, end, ok, c.end, c.ok)
		}
	}
	word := regexp.MustCompile(`^\w$`)
	for b := 0; b < 256; b++ {
		if want := word.MatchString(string([]byte{byte(b)})); IsWordByte(byte(b)) != want {
			t.Errorf("IsWordByte(%#x) = %v, want %v as \\w", b, !want, want)
		}
	}
}
