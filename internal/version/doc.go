// Package version says which npcd is running, from the build information
// the Go toolchain stamps into every binary, so no release step has to set
// it by hand.
//
// It imports nothing of npcd.
package version
