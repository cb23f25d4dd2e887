package bench

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
)

// startCPUProfile starts a CPU profile written to path, for --cpuprofile,
// and returns the function that stops it and closes the file (safe to
// call more than once). With no path it does nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}, nil
}
