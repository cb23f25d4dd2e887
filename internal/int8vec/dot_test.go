package int8vec

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
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

// TestDotRows compares DotRows, with and without vector instructions,
// with the plain sum of products of each row: lengths around the
// 16-code steps, up to 70 rows, random codes and the extremes, at
// unaligned starts, and rows longer than the rows asked for.
func TestDotRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	simd := hasSIMD
	defer func() { hasSIMD = simd }()
	for _, useSIMD := range []bool{false, simd} {
		hasSIMD = useSIMD
		for _, d := range []int{0, 1, 15, 16, 17, 31, 32, 33, 48, 100, 256, 300, maxPadded + 3, 1536} {
			for _, count := range []int{0, 1, 2, 3, 64, 70} {
				for trial := 0; trial < 3; trial++ {
					off := rng.IntN(16)
					buf := make([]int8, off+d*(count+2)+5)
					for i := range buf {
						switch trial {
						case 0:
							buf[i] = -128
						default:
							buf[i] = int8(rng.IntN(256) - 128)
						}
					}
					q := make([]int8, d)
					for i := range q {
						q[i] = int8(rng.IntN(256) - 128)
					}
					if trial == 0 {
						copy(q, buf)
					}
					rows := buf[off:]
					out := make([]int32, count+1)
					out[count] = 7 // past the rows asked for: untouched
					DotRows(q, rows, out[:count])
					for r := range count {
						if want := naive(q, rows[r*d:(r+1)*d]); out[r] != want {
							t.Fatalf("simd=%v d=%d count=%d trial %d: row %d %d, want %d", useSIMD, d, count, trial, r, out[r], want)
						}
					}
					if out[count] != 7 {
						t.Fatalf("simd=%v d=%d count=%d: wrote past the rows", useSIMD, d, count)
					}
				}
			}
		}
	}
}

// TestDotRowsPanicsOnShortRows: fewer codes than the rows asked for is a
// caller's bug, caught before any vector instruction reads past them.
func TestDotRowsPanicsOnShortRows(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	DotRows(make([]int8, 32), make([]int8, 3*32-1), make([]int32, 3))
}

// TestDotRowsShortRowsChangeNothing: the panic comes before any row is
// written.
func TestDotRowsShortRowsChangeNothing(t *testing.T) {
	out := []int32{5, 5, 5}
	func() {
		defer func() { recover() }()
		DotRows(make([]int8, 100), make([]int8, 3*100-1), out)
	}()
	if out[0] != 5 || out[1] != 5 || out[2] != 5 {
		t.Fatalf("rows written: %v", out)
	}
}

// BenchmarkDotRows scans 64 rows (a block of an index's vectors) with
// DotRows and, for comparison, with a call of Dot per row.
func BenchmarkDotRows(b *testing.B) {
	const count = 64
	for _, d := range []int{100, 256} {
		q, rows := make([]int8, d), make([]int8, count*d)
		for i := range q {
			q[i] = int8(i * 7)
		}
		for i := range rows {
			rows[i] = int8(i * 13)
		}
		out := make([]int32, count)
		b.Run(fmt.Sprintf("rows/%d", d), func(b *testing.B) {
			for b.Loop() {
				DotRows(q, rows, out)
			}
			sink = out[count-1]
		})
		b.Run(fmt.Sprintf("each/%d", d), func(b *testing.B) {
			for b.Loop() {
				for r := range out {
					out[r] = Dot(q, rows[r*d:(r+1)*d])
				}
			}
			sink = out[count-1]
		})
	}
}

// TestPaddedRows: the rows DotRows reads padded are exactly those whose
// padded read ends within the codes it was given.
func TestPaddedRows(t *testing.T) {
	for count := 0; count <= 10; count++ {
		for d := 1; d <= 40; d++ {
			for _, n := range []int{d, (d + 15) &^ 15, d + 16} {
				for _, size := range []int{count * d, count*d + 5, count*d + n} {
					want := 0
					for r := range count {
						if r*d+n <= size {
							want++
						}
					}
					if got := paddedRows(count, size, d, n); got != want {
						t.Fatalf("paddedRows(%d, %d, %d, %d) = %d, want %d", count, size, d, n, got, want)
					}
				}
			}
		}
	}
}

// bytesAsCodes is b read as int8 codes.
func bytesAsCodes(b []byte) []int8 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int8)(unsafe.Pointer(&b[0])), len(b))
}
