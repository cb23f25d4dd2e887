package bench

import (
	"fmt"
	"os"
	"runtime"
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

// writeMemProfile writes the memory profile named profile ("heap", whose
// default view is what is live; "allocs", what was allocated) to path,
// after a garbage collection so that what is live is up to date, for
// --memprofile. With no path it does nothing.
func writeMemProfile(path, profile string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	runtime.GC()
	err = pprof.Lookup(profile).WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	return nil
}
