//go:build race

package llm

// raceEnabled reports whether the tests run under the race detector, whose
// instrumentation allocates on its own, so allocation counts mean nothing.
const raceEnabled = true
