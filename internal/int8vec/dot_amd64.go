//go:build !purego

package int8vec

import "golang.org/x/sys/cpu"

// hasSIMD: AVX2, with the operating system saving its registers (which
// cpu.X86.HasAVX2 includes).
var hasSIMD = cpu.X86.HasAVX2

// dotRowsSIMD writes into out[0:count] the inner products of the first n
// codes of q with those of count rows, stride codes apart from rows on; n
// is a positive multiple of 16.
//
//go:noescape
func dotRowsSIMD(q, rows *int8, n, stride, count int, out *int32)
