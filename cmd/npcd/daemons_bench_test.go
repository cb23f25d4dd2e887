package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDaemons measures ticks per second through real `npcd serve`
// processes: one on SQLite, one on PostgreSQL and two sharing one
// PostgreSQL database (the PostgreSQL ones need NPCD_TEST_POSTGRES). 32
// clients post an event to one of 100 NPCs and tick it, each NPC always on
// the same daemon (sticky routing by NPC). Run with -benchtime=2000x:
//
//	NPCD_TEST_POSTGRES=postgres://… go test ./cmd/npcd -run XXX -bench Daemons -benchtime 2000x
func BenchmarkDaemons(b *testing.B) {
	bin := buildDaemon(b)
	for _, c := range []struct {
		name    string
		daemons int
		pg      bool
	}{{"sqlite-1", 1, false}, {"postgres-1", 1, true}, {"postgres-2", 2, true}} {
		b.Run(c.name, func(b *testing.B) {
			db := filepath.Join(b.TempDir(), "npcd.db")
			var env []string
			if c.pg {
				db, _ = freshPostgres(b)
				env = append(env, "NPCD_DB_DRIVER=postgres")
			}
			env = append(env, "NPCD_MAX_CONCURRENT_CALLS=32")
			var ds []*daemon
			for len(ds) < c.daemons {
				ds = append(ds, startBinary(b, bin, db, env...))
			}
			// Each NPC is created through the daemon that serves it, which
			// then holds its lease.
			const npcs = 100
			for i := 0; i < npcs; i++ {
				ds[i%len(ds)].put(b, fmt.Sprintf("npc-%d", i))
			}
			for _, d := range ds {
				d.client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
			}
			var next, failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < 32; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						n := i % npcs
						id, d := fmt.Sprintf("npc-%d", n), ds[n%len(ds)]
						body := fmt.Sprintf(`{"events": [{"kind": "say", "actor": "alice", "text": "Round %d: have you seen my sword?"}]}`, i)
						if code, err := d.do(context.Background(), "POST", "/v1/npcs/"+id+"/events", body, nil); err != nil || code != 202 {
							failed.Add(1)
							continue
						}
						if code, err := d.do(context.Background(), "POST", "/v1/npcs/"+id+"/tick", "", nil); err != nil || code != 200 {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if failed.Load() > 0 {
				b.Fatalf("%d requests failed", failed.Load())
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ticks/s")
			for _, d := range ds {
				d.stop(b)
			}
		})
	}
}
