package int8vec

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func naive(a, b []int8) int32 {
	var s int32
	for i := range a {
		s += int32(a[i]) * int32(b[i])
	}
	return s
}

// TestDot compares Dot, with and without vector instructions, with the
// plain sum of products: every length up to 300 and 4096, random codes
// and the extremes (-128·-128 summed over a long vector is the largest
// sum), b longer than a, and unaligned starts.
func TestDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	simd := hasSIMD
	defer func() { hasSIMD = simd }()
	for _, useSIMD := range []bool{false, simd} {
		hasSIMD = useSIMD
		for n := 0; n <= 4096; n++ {
			if n > 300 && n != 4096 {
				continue
			}
			for trial := 0; trial < 4; trial++ {
				buf := make([]int8, 2*n+40)
				for i := range buf {
					switch trial {
					case 0:
						buf[i] = -128
					case 1:
						buf[i] = 127
					default:
						buf[i] = int8(rng.IntN(256) - 128)
					}
				}
				off := rng.IntN(16)
				a := buf[off : off+n]
				b := buf[off+n+3 : off+2*n+3+rng.IntN(8)]
				if got, want := Dot(a, b), naive(a, b[:n]); got != want {
					t.Fatalf("simd=%v n=%d trial %d: Dot %d, want %d", useSIMD, n, trial, got, want)
				}
			}
		}
	}
	if n := int32(4096 * 128 * 128); naive(make128(4096), make128(4096)) != n {
		t.Fatal("reference sum")
	}
}

func make128(n int) []int8 {
	v := make([]int8, n)
	for i := range v {
		v[i] = -128
	}
	return v
}

// TestDotPanicsOnShortB: b shorter than a is a caller's bug, caught
// before any vector instruction reads past b.
func TestDotPanicsOnShortB(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	Dot(make([]int8, 32), make([]int8, 31))
}

func BenchmarkDot(b *testing.B) {
	for _, n := range []int{100, 256} {
		x, y := make([]int8, n), make([]int8, n)
		for i := range x {
			x[i], y[i] = int8(i*7), int8(i*13)
		}
		for _, useSIMD := range []bool{false, true} {
			if useSIMD && !SIMD() {
				continue
			}
			name := "go"
			if useSIMD {
				name = "simd"
			}
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				simd := hasSIMD
				hasSIMD = useSIMD
				defer func() { hasSIMD = simd }()
				var s int32
				for b.Loop() {
					s += Dot(x, y)
				}
				sink = s
			})
		}
	}
}

var sink int32
