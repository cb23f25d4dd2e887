package int8vec

import (
	"syscall"
	"testing"
)

// TestDotRowsReadsNoFurther places the rows last before a page that
// cannot be read: a scan that read one code past them would stop the
// test with a fault.
func TestDotRowsReadsNoFurther(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	for _, d := range []int{16, 17, 100, 250, 1536} {
		for _, count := range []int{1, 2, 5, 16} {
			size := d * count
			if size > page {
				continue
			}
			b := mem[page-size : page]
			rows := make([]int8, size)
			for i := range rows {
				rows[i] = int8(i*31 + d)
				b[i] = byte(rows[i])
			}
			q := make([]int8, d)
			for i := range q {
				q[i] = int8(i*17 - 100)
			}
			out := make([]int32, count)
			DotRows(q, bytesAsCodes(b), out)
			for r := range count {
				if want := naive(q, rows[r*d:(r+1)*d]); out[r] != want {
					t.Fatalf("d=%d count=%d: row %d %d, want %d", d, count, r, out[r], want)
				}
			}
		}
	}
}
