package int8vec

// Dot is the inner product of two int8 vectors of equal length (b is read
// up to len(a)).
func Dot(a, b []int8) int32 {
	b = b[:len(a)]
	var s int32
	if n := len(a) &^ 15; hasSIMD && n > 0 {
		dotRowsSIMD(&a[0], &b[0], n, n, 1, &s)
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

// DotRows writes into out[r] the inner product of q with row r of rows,
// len(out) rows of len(q) codes each, stored one after the other: the
// whole scan of an index's vectors in one call, which spares each row the
// call and the checks of Dot (more than half its time at 100 codes).
//
// With vector instructions, a length that is no multiple of 16 (up to
// maxPadded) is rounded up with zero codes of q: each row's last step
// then reads a few codes of the next row (or of rows past len(out)), which
// count for nothing. The last rows, whose step would read past rows, take
// Dot.
func DotRows(q, rows []int8, out []int32) {
	d := len(q)
	if len(out) == 0 {
		return
	}
	if len(rows) < len(out)*d {
		panic("int8vec: DotRows given fewer codes than its rows")
	}
	if hasSIMD && d%16 == 0 && d > 0 {
		dotRowsSIMD(&q[0], &rows[0], d, d, len(out), &out[0])
		return
	}
	if !hasSIMD || d < 16 || d > maxPadded {
		for r := range out {
			out[r] = Dot(q, rows[r*d:(r+1)*d])
		}
		return
	}
	n := (d + 15) &^ 15
	var qp [maxPadded + 16]int8
	copy(qp[:], q)
	fast := paddedRows(len(out), len(rows), d, n)
	if fast > 0 {
		dotRowsSIMD(&qp[0], &rows[0], n, d, fast, &out[0])
	}
	for r := fast; r < len(out); r++ {
		out[r] = Dot(q, rows[r*d:(r+1)*d])
	}
}

// paddedRows is how many of count rows of d codes, stored one after the
// other in size codes, can be read n codes each (n >= d) without reading
// past them: row r can when r*d+n <= size.
func paddedRows(count, size, d, n int) int {
	if n <= d {
		return count
	}
	if size < n {
		return 0
	}
	return min(count, (size-n)/d+1)
}

// maxPadded is the longest vector DotRows pads on the stack; a longer one
// whose length is no multiple of 16 takes Dot row by row.
const maxPadded = 1024
