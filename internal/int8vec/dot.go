package int8vec

// Dot is the inner product of two int8 vectors of equal length (b is read
// up to len(a)).
func Dot(a, b []int8) int32 {
	b = b[:len(a)]
	var s int32
	if n := len(a) &^ 15; hasSIMD && n > 0 {
		s = dotSIMD(&a[0], &b[0], n)
		a, b = a[n:], b[n:]
	}
	return s + dotGo(a, b)
}

// SIMD reports whether Dot uses vector instructions on this machine.
func SIMD() bool { return hasSIMD }

// dotGo is Dot in portable Go. Sixteen elements a step through fixed-size
// subslices let the compiler drop the bounds checks: about 6 instructions
// an element instead of 12.
func dotGo(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	for len(a) >= 16 && len(b) >= 16 {
		x, y := a[:16:16], b[:16:16]
		s0 += int32(x[0])*int32(y[0]) + int32(x[4])*int32(y[4]) + int32(x[8])*int32(y[8]) + int32(x[12])*int32(y[12])
		s1 += int32(x[1])*int32(y[1]) + int32(x[5])*int32(y[5]) + int32(x[9])*int32(y[9]) + int32(x[13])*int32(y[13])
		s2 += int32(x[2])*int32(y[2]) + int32(x[6])*int32(y[6]) + int32(x[10])*int32(y[10]) + int32(x[14])*int32(y[14])
		s3 += int32(x[3])*int32(y[3]) + int32(x[7])*int32(y[7]) + int32(x[11])*int32(y[11]) + int32(x[15])*int32(y[15])
		a, b = a[16:], b[16:]
	}
	for i := range a {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}
