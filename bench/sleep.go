package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
)

// SleepOptions are the settings of a sleep sweep.
type SleepOptions struct {
	NPCs    int // NPCs to put to sleep
	Entries int // journal entries each NPC consolidates
	Workers int // sleeps run at once
	// CPUProfile, when set, is a file the sweep's CPU profile is written to.
	CPUProfile string
	// MemProfile, when set, is a file the allocation profile is written to
	// after the sweep (allocations of the preparation included).
	MemProfile string
}

// SleepSweep puts o.NPCs NPCs to sleep with o.Workers at once, each with
// o.Entries journal entries to consolidate and a context past the sleep
// threshold, and reports the sweep's wall time; then sweeps again, with
// nothing new.
func SleepSweep(ctx context.Context, out io.Writer, h Harness, o SleepOptions) error {
	npcs, entries, workers := o.NPCs, o.Entries, o.Workers
	if npcs < 1 || entries < 0 || workers < 1 {
		return fmt.Errorf("--npcs and --workers must be at least 1, --entries at least 0")
	}
	a, done, err := h.Open(ctx, Options{})
	if err != nil {
		return err
	}
	defer done()
	fmt.Fprintf(out, "preparing %d NPCs, each with %d journal entries and a context at ~75%% of a 4096 window...\n", npcs, entries)
	ids := make([]string, npcs)
	texts := []string{"I live in Oakvale by the mill.", "I lost my sword at the forge!", "My brother owes me 12 gold.",
		"I work as a miller.", "The wolves took 3 sheep last night!", "My name is Alice and I was born in Riverton."}
	for i := range ids {
		ids[i] = fmt.Sprintf("npc-%04d", i)
		c := benchNPC(ids[i])
		c.ContextWindow = 4096
		if _, err := a.Engine.PutNPC(ctx, c); err != nil {
			return err
		}
		var es []*journal.Entry
		for j := 0; j < entries; j++ {
			t := fmt.Sprintf(`[2026-11-2%d 10:%02d] alice%d says: %q`, j%10, j%60, j%5, texts[j%len(texts)])
			es = append(es, &journal.Entry{Type: journal.TypeConversation, Content: t, Importance: journal.Importance("say", t)})
		}
		if err := a.Journal.Add(ctx, ids[i], es...); err != nil {
			return err
		}
		c, _ = a.Chars.Get(ctx, ids[i])
		if err := fillHistory(ctx, a, ids[i], int(0.75*float64(c.ContextWindow))-c.ContextTokens()); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "sleeping %d NPCs with %d workers\n", npcs, workers)
	var mu sync.Mutex
	var consolidated, added, compactions int
	work := make(chan string)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	stopProfile, err := startCPUProfile(o.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	// Allocations are counted over the whole process, as CPU time is: the
	// sweep is all it runs meanwhile.
	var mem0 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	start, cpu0 := time.Now(), cpuTime()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				rep, err := a.Engine.Sleep(ctx, id)
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				consolidated += rep.Consolidated
				added += rep.MemoriesAdded
				if rep.Compaction != nil {
					compactions++
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	took, cpu := time.Since(start), cpuTime()-cpu0
	var mem1 runtime.MemStats
	runtime.ReadMemStats(&mem1)
	stopProfile() // the profile covers the sweep alone
	select {
	case err := <-errc:
		return err
	default:
	}
	if err := writeMemProfile(o.MemProfile, "allocs"); err != nil {
		return err
	}
	fmt.Fprintf(out, "  sweep of %d NPCs: %s (%.1f ms per NPC, %.0f NPCs/s); %d entries consolidated, %d memories, %d compactions\n",
		npcs, took.Round(time.Millisecond), float64(took.Milliseconds())/float64(npcs), float64(npcs)/took.Seconds(), consolidated, added, compactions)
	// CPU time does not depend on what else the machine runs, as wall time does.
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Fprintf(out, "  CPU time of the sweep %s (%.1f ms per NPC); peak RSS %.0f MiB\n",
		cpu.Round(time.Millisecond), float64(cpu.Microseconds())/1000/float64(npcs), float64(ru.Maxrss)/1024)
	fmt.Fprintf(out, "  allocated %.0f KiB and %.1fk allocations per NPC\n",
		float64(mem1.TotalAlloc-mem0.TotalAlloc)/1024/float64(npcs), float64(mem1.Mallocs-mem0.Mallocs)/1000/float64(npcs))
	// A second sweep finds nothing new.
	start = time.Now()
	for _, id := range ids {
		if _, err := a.Engine.Sleep(ctx, id); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "  second sweep, nothing changed: %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// Schedule measures the idle CPU and memory cost of n scheduled NPC
// sleeps, watched for idle.
func Schedule(out io.Writer, n int, idle time.Duration) error {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	sc, err := sleep.NewScheduler(sleep.ScheduleConfig{}, sleep.SleeperFunc(func(ctx context.Context, id string) (*sleep.Report, error) {
		return &sleep.Report{}, nil
	}))
	if err != nil {
		return err
	}
	defer sc.Shutdown()
	start := time.Now()
	for i := 0; i < n; i++ {
		// Spread bedtimes over the night so they do not all fall together.
		c := &character.Character{ID: fmt.Sprintf("npc-%05d", i), Sleep: character.SleepSettings{Cron: fmt.Sprintf("%d %d * * *", i%60, (i/60)%6)}}
		if err := sc.Schedule(c); err != nil {
			return err
		}
	}
	sc.Start()
	scheduling := time.Since(start)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	cpu0 := cpuTime()
	time.Sleep(idle)
	cpu := cpuTime() - cpu0
	fmt.Fprintf(out, "%d scheduled NPCs: scheduled in %s; heap %+.1f MiB (%.0f bytes per NPC); goroutines %+d; idle CPU over %s: %s (%.3f%% of one core)\n",
		n, scheduling.Round(time.Millisecond), float64(int64(after.HeapInuse)-int64(before.HeapInuse))/(1<<20),
		float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(n), runtime.NumGoroutine()-g0, idle, cpu.Round(time.Millisecond),
		100*cpu.Seconds()/idle.Seconds())
	return nil
}
