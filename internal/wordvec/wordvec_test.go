package wordvec

import (
	"bytes"
	"compress/gzip"
	"testing"
)

func table(t *testing.T) *Table {
	t.Helper()
	tb, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestEmbeddedTableLoads(t *testing.T) {
	tb := table(t)
	if tb.Len() < 30000 || tb.Dims() != 100 {
		t.Fatalf("%d words of %d dimensions", tb.Len(), tb.Dims())
	}
	for _, w := range []string{"child", "sword", "camping", "happy", "pottery"} {
		id, ok := tb.ID(w)
		if !ok {
			t.Fatalf("%q missing", w)
		}
		if tb.Word(id) != w {
			t.Fatalf("word %d is %q, want %q", id, tb.Word(id), w)
		}
		if wt := tb.Weight(id); wt <= 0 || wt > 1 {
			t.Fatalf("%q weighs %v", w, wt)
		}
		if c := tb.Cosine(id, id); c < 0.999 || c > 1.001 {
			t.Fatalf("%q has cosine %v with itself", w, c)
		}
	}
	// Names and words outside the dictionary are not in the vocabulary.
	for _, w := range []string{"caroline", "xqzv", "Child"} {
		if _, ok := tb.ID(w); ok {
			t.Fatalf("%q should be missing", w)
		}
	}
	if _, ok := tb.Similarity("child", "xqzv"); ok {
		t.Fatal("similarity with a missing word reported")
	}
}

func TestSimilarWordsScoreAboveUnrelated(t *testing.T) {
	tb := table(t)
	sim := func(a, b string) float64 {
		t.Helper()
		s, ok := tb.Similarity(a, b)
		if !ok {
			t.Fatalf("%q or %q missing", a, b)
		}
		return s
	}
	for _, c := range []struct{ word, near, far string }{
		{"kid", "child", "turnip"},
		{"sword", "blade", "turnip"},
		{"pottery", "ceramics", "election"},
		{"sad", "unhappy", "carburetor"},
		{"camping", "hiking", "mortgage"},
		{"job", "career", "banana"},
	} {
		near, far := sim(c.word, c.near), sim(c.word, c.far)
		if near <= far+0.2 {
			t.Errorf("%s: %s %.3f, %s %.3f", c.word, c.near, near, c.far, far)
		}
		if far > 0.3 {
			t.Errorf("%s and %s are unrelated, cosine %.3f", c.word, c.far, far)
		}
	}
	if sim("kid", "child") != sim("child", "kid") {
		t.Error("similarity is not symmetric")
	}
	nn := tb.Nearest("pottery", 5)
	if len(nn) != 5 || nn[0].Word == "pottery" {
		t.Fatalf("nearest to pottery: %v", nn)
	}
	found := false
	for _, n := range nn {
		found = found || n.Word == "ceramics"
	}
	if !found {
		t.Errorf("ceramics not among the nearest to pottery: %v", nn)
	}
	for i := 1; i < len(nn); i++ {
		if nn[i].Cosine > nn[i-1].Cosine {
			t.Fatalf("not sorted: %v", nn)
		}
	}
	if tb.Nearest("xqzv", 5) != nil {
		t.Fatal("neighbours of a missing word")
	}
}

func TestDecodeIsDeterministic(t *testing.T) {
	a, err := Decode(asset)
	if err != nil {
		t.Fatal(err)
	}
	b := table(t)
	if a.Len() != b.Len() {
		t.Fatalf("%d words, then %d", a.Len(), b.Len())
	}
	for _, w := range []string{"kid", "sword", "river"} {
		ia, _ := a.ID(w)
		ib, _ := b.ID(w)
		va, vb := make([]float32, a.Dims()), make([]float32, b.Dims())
		a.AddTo(va, ia, 1)
		b.AddTo(vb, ib, 1)
		for i := range va {
			if va[i] != vb[i] {
				t.Fatalf("%q differs at %d: %v, %v", w, i, va[i], vb[i])
			}
		}
	}
	if d, _ := Default(); d != b {
		t.Fatal("Default decoded the table twice")
	}
}

func TestDecodeRefusesDamagedInput(t *testing.T) {
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	for name, in := range map[string][]byte{
		"not gzip":        []byte("hello"),
		"wrong magic":     gz([]byte("NOTAVEC\n\x01\x00\x00\x00\x02\x00")),
		"truncated words": gz([]byte(magic + "\x02\x00\x00\x00\x02\x00\x03ab")),
		"missing codes":   gz([]byte(magic + "\x01\x00\x00\x00\x02\x00\x02ab\xff\x01")),
		"no words":        gz([]byte(magic + "\x00\x00\x00\x00\x02\x00")),
	} {
		if _, err := Decode(in); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	ok := gz([]byte(magic + "\x01\x00\x00\x00\x02\x00\x02ab\xff\x03\x04"))
	tb, err := Decode(ok)
	if err != nil || tb.Len() != 1 || tb.Dims() != 2 {
		t.Fatalf("%v, %v", tb, err)
	}
}

// TestEveryWordIsFoundAtItsNumber checks the lookup table: every word of
// the embedded table is found at its number, a word repeated at its last,
// words absent are not found, and decoding makes no object per word (the
// collector traces what the table holds for the daemon's whole life).
func TestEveryWordIsFoundAtItsNumber(t *testing.T) {
	tb := table(t)
	last := map[string]int32{}
	for i := range int32(tb.Len()) {
		last[tb.Word(i)] = i
	}
	for i := range int32(tb.Len()) {
		w := tb.Word(i)
		if id, ok := tb.ID(w); !ok || id != last[w] {
			t.Fatalf("word %d %q found at %d (%v), want %d", i, w, id, ok, last[w])
		}
	}
	for _, w := range []string{"qzxvk", "Sword", "swords and", ""} {
		if _, ok := tb.ID(w); ok && last[w] == 0 {
			t.Errorf("%q found, not in the table", w)
		}
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(magic + "\x03\x00\x00\x00\x01\x00\x02ab\xff\x02cd\x80\x02ab\x40\x01\x02\x03"))
	zw.Close()
	small, err := Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := small.ID("ab"); !ok || id != 2 || small.Word(0) != "ab" || small.Word(1) != "cd" {
		t.Fatalf("ab at %d (%v), words %q %q, want ab at 2 (its last), then ab and cd", id, ok, small.Word(0), small.Word(1))
	}
	if id, ok := small.ID("cd"); !ok || id != 1 {
		t.Fatalf("cd at %d (%v), want 1", id, ok)
	}
	allocs := testing.AllocsPerRun(1, func() {
		if _, err := Decode(asset); err != nil {
			t.Fatal(err)
		}
	})
	// Decompressing makes some thousands (flate's tables); a string per
	// word would make 40,000 more.
	if allocs > float64(tb.Len()/2) {
		t.Errorf("decoding %d words made %.0f objects, want fewer than one per two words", tb.Len(), allocs)
	}
}
