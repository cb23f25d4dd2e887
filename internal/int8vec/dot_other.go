//go:build !amd64 || purego

package int8vec

var hasSIMD = false

func dotRowsSIMD(q, rows *int8, n, stride, count int, out *int32) {
	panic("int8vec: no vector instructions")
}
