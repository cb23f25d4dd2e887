// Package int8vec computes inner products of int8 vectors, the codes in
// which the search indexes keep their vectors. On amd64 with AVX2 it uses
// vector instructions, sixteen codes at a time; elsewhere, with the build
// tag purego, and for the last codes of a vector, portable Go. Both give
// the same sum, exactly: it is a sum of integers. DotRows scans many
// vectors stored one after the other in one call.
package int8vec
