package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/api"
	"github.com/npcd/npcd/store"
)

var (
	killRounds = flag.Int("kill.rounds", 20, "kill test: how many times npcd serve is started, driven and SIGKILLed")
	killSeed   = flag.Uint64("kill.seed", 0, "kill test: seed of the random moments (0: from the clock)")
)

// The NPCs the kill test drives: stable ones are never deleted, so every
// event they accepted must be found; ephemeral ones are deleted and created
// again all the time, so nothing of an earlier life may be found.
var (
	stableNPCs    = []string{"kill-a", "kill-b", "kill-c"}
	ephemeralNPCs = []string{"tmp-x", "tmp-y"}
)

// TestKillAtRandomMoments starts the real npcd binary, drives it with
// events, ticks, compactions, sleeps and deletes, SIGKILLs it at a random
// moment, and after each round checks the database file: integrity, every
// accepted event consumed exactly once or still pending, no duplicate
// memory, no row of an NPC that does not exist, nothing of a deleted NPC's
// earlier life, and that every NPC ticks again. The last round drains the
// inboxes and stops the daemon gracefully: then no accepted event may be
// pending.
func TestKillAtRandomMoments(t *testing.T) {
	bin := buildDaemon(t)
	seed := *killSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-kill.seed to replay), %d rounds", seed, *killRounds)
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	db := filepath.Join(t.TempDir(), "npcd.db")
	led := newLedger()
	for round := 0; round < *killRounds; round++ {
		d := startBinary(t, bin, db)
		if round == 0 {
			for _, id := range stableNPCs {
				d.put(t, id)
			}
		}
		d.ticksAgain(t, led, round)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		drive(ctx, &wg, d, led, round, rng.Uint64())
		time.Sleep(time.Duration(150+rng.IntN(1100)) * time.Millisecond)
		d.kill(t)
		cancel()
		wg.Wait()
		led.kills++
		for _, p := range led.problems {
			t.Errorf("round %d: %s", round, p)
		}
		checkDatabase(t, db, led, false)
		if t.Failed() {
			t.Fatalf("round %d (seed %d) left the database inconsistent; the daemon's log ends with:\n%s", round, seed, d.logTail())
		}
	}
	// The last life: every NPC ticks again, the inboxes drain, and a
	// graceful stop leaves nothing pending.
	d := startBinary(t, bin, db)
	d.ticksAgain(t, led, *killRounds)
	for i := 0; ; i++ {
		var res api.BatchTickResponse
		if code := d.call(t, "POST", "/v1/tick", `{}`, &res); code != 200 {
			t.Fatalf("draining tick = %d", code)
		}
		if len(res.Results) == 0 && len(res.Errors) == 0 {
			break
		}
		if i > 500 {
			t.Fatal("the inboxes never drained")
		}
	}
	d.stop(t)
	checkDatabase(t, db, led, true)
	gone := 0
	for range led.gone {
		gone++
	}
	t.Logf("kill test: %d rounds (%d SIGKILLs); %d events accepted: %d consumed exactly once, %d pending, %d deleted with their NPC, %d lost; "+
		"%d ticks, %d compactions, %d sleeps, %d deletes",
		*killRounds, led.kills, led.accepted(), led.consumed, led.pending, gone, led.lost, led.ticks, led.compactions, led.sleeps, led.deletes)
}

// buildDaemon builds npcd into the test's temporary directory, without the
// race detector whatever the test runs with: it is the process under test,
// not the code.
func buildDaemon(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "npcd")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// daemon is one life of the npcd process.
type daemon struct {
	cmd    *exec.Cmd
	addr   string
	client *http.Client
	done   chan error
	mu     sync.Mutex
	tail   []string // the last lines of its log
	// slept counts the "slept" lines of its log (scheduled sleeps that
	// ended), by NPC.
	slept map[string]int
}

// startBinary runs `npcd serve` on a free loopback port over db, with env
// (KEY=value) added to its environment, and waits until it listens.
func startBinary(t testing.TB, bin, db string, env ...string) *daemon {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", db, "--log-level", "info")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NPCD_") && !strings.HasPrefix(kv, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "NPCD_WAL_CHECKPOINT=1s")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, client: &http.Client{Timeout: 20 * time.Second}, done: make(chan error, 1), slept: map[string]int{}}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			var rec struct {
				Message string `json:"message"`
				Addr    string `json:"addr"`
				NPC     string `json:"npc"`
			}
			parsed := json.Unmarshal([]byte(line), &rec) == nil
			d.mu.Lock()
			d.tail = append(d.tail, line)
			if len(d.tail) > 20 {
				d.tail = d.tail[1:]
			}
			if parsed && rec.Message == "slept" {
				d.slept[rec.NPC]++
			}
			d.mu.Unlock()
			if parsed && rec.Message == "npcd listening" {
				ready <- rec.Addr
			}
		}
		d.done <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	select {
	case d.addr = <-ready:
	case err := <-d.done:
		t.Fatalf("npcd serve exited before listening: %v\n%s", err, d.logTail())
	case <-time.After(60 * time.Second):
		t.Fatalf("npcd serve did not listen within a minute\n%s", d.logTail())
	}
	return d
}

func (d *daemon) logTail() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.tail, "\n")
}

// kill SIGKILLs the daemon and waits for it to be gone.
func (d *daemon) kill(t testing.TB) {
	t.Helper()
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.done
}

// stop asks the daemon to shut down gracefully and waits.
func (d *daemon) stop(t testing.TB) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatalf("graceful stop: %v\n%s", err, d.logTail())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("npcd did not stop within a minute")
	}
}

// do sends one request and decodes a 2xx answer into out. A transport
// error (the daemon killed mid-request) is returned as is.
func (d *daemon) do(ctx context.Context, method, path, body string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+d.addr+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if out != nil && resp.StatusCode/100 == 2 && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode, nil
}

// call is do for the test's own requests, made while nothing kills the
// daemon: a transport error fails the test.
func (d *daemon) call(t testing.TB, method, path, body string, out any) int {
	t.Helper()
	code, err := d.do(context.Background(), method, path, body, out)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", method, path, err, d.logTail())
	}
	return code
}

// npcBody is the settings of every NPC of the test: a small window, so
// ticks compact often.
const npcBody = `{"name": "Brom", "persona": "You are Brom, the gruff village blacksmith of Oakvale.", "context_window": 4096, "max_output_tokens": 256}`

func (d *daemon) put(t testing.TB, id string) {
	t.Helper()
	if code := d.call(t, "PUT", "/v1/npcs/"+id, npcBody, nil); code != 200 && code != 201 {
		t.Fatalf("PUT %s = %d", id, code)
	}
}

// ticksAgain checks that every existing NPC takes an event and ticks after
// a restart.
func (d *daemon) ticksAgain(t *testing.T, led *ledger, round int) {
	t.Helper()
	for _, id := range append(slices.Clone(stableNPCs), ephemeralNPCs...) {
		if d.call(t, "GET", "/v1/npcs/"+id, "", nil) == 404 {
			continue
		}
		ref := fmt.Sprintf("again-%d-%s", round, id)
		var acc api.EventsAccepted
		body := fmt.Sprintf(`{"events": [{"id": %q, "kind": "say", "actor": "alice", "text": "Are you still there, Brom? (%s)"}]}`, ref, ref)
		if code := d.call(t, "POST", "/v1/npcs/"+id+"/events", body, &acc); code != 202 || acc.Accepted != 1 {
			t.Fatalf("round %d: %s takes no event after the restart: %d %+v", round, id, code, acc)
		}
		led.accept(id, ref)
		var res api.TickResult
		if code := d.call(t, "POST", "/v1/npcs/"+id+"/tick", "", &res); code != 200 || res.Idle {
			t.Fatalf("round %d: %s does not tick after the restart: %d %+v\n%s", round, id, code, res, d.logTail())
		}
	}
}

// ledger is what the daemon acknowledged, to check the database against.
type ledger struct {
	mu sync.Mutex
	// events are the refs each NPC's current life accepted (202).
	events map[string]map[string]bool
	// unsure are refs posted without an answer (the daemon died): stored
	// or not, either is fine.
	unsure map[string]bool
	// gone are refs of earlier lives of ephemeral NPCs: never to be found.
	gone map[string]bool
	// pendingOp is an ephemeral NPC's delete or create that got no answer.
	pendingOp map[string]string

	// problems are acknowledgements that contradict the contract.
	problems []string

	kills, ticks, compactions, sleeps, deletes int
	consumed, pending, lost                    int
	total                                      int
}

func (l *ledger) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

func newLedger() *ledger {
	return &ledger{events: map[string]map[string]bool{}, unsure: map[string]bool{}, gone: map[string]bool{}, pendingOp: map[string]string{}}
}

func (l *ledger) accept(id, ref string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.events[id] == nil {
		l.events[id] = map[string]bool{}
	}
	l.events[id][ref] = true
	l.total++
}

func (l *ledger) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// endLife moves an ephemeral NPC's refs to the gone set.
func (l *ledger) endLife(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ref := range l.events[id] {
		l.gone[ref] = true
	}
	delete(l.events, id)
}

func (l *ledger) count(f *int) {
	l.mu.Lock()
	*f++
	l.mu.Unlock()
}

// drive starts the workers of one round; they stop when ctx ends or the
// daemon stops answering.
func drive(ctx context.Context, wg *sync.WaitGroup, d *daemon, led *ledger, round int, seed uint64) {
	worker := func(name string, fn func(rng *rand.Rand, i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(len(name))*7919+uint64(name[0])))
			for i := 0; ctx.Err() == nil; i++ {
				if err := fn(rng, i); err != nil {
					return
				}
			}
		}()
	}
	post := func(who string) func(*rand.Rand, int) error {
		return func(rng *rand.Rand, i int) error {
			id := stableNPCs[rng.IntN(len(stableNPCs))]
			n := 1 + rng.IntN(4)
			var evs []string
			var refs []string
			for j := 0; j < n; j++ {
				ref := fmt.Sprintf("r%d-%s-%d-%d", round, who, i, j)
				refs = append(refs, ref)
				evs = append(evs, fmt.Sprintf(`{"id": %q, "kind": "say", "actor": "alice", "text": "I owe you %d gold for the sword, Brom, and the wolves took my cousin %s."}`, ref, i*10+j, ref))
			}
			var acc api.EventsAccepted
			code, err := d.do(ctx, "POST", "/v1/npcs/"+id+"/events", `{"events": [`+strings.Join(evs, ",")+`]}`, &acc)
			if err != nil {
				led.mu.Lock()
				for _, r := range refs {
					led.unsure[r] = true
				}
				led.mu.Unlock()
				return err
			}
			if code == 202 {
				if acc.Accepted != n {
					led.problem("%s: %d of %d new events accepted (%d duplicates)", id, acc.Accepted, n, acc.Duplicates)
				}
				for _, r := range refs {
					led.accept(id, r)
				}
			}
			return nil
		}
	}
	worker("post1", post("p1"))
	worker("post2", post("p2"))
	worker("tick", func(rng *rand.Rand, i int) error {
		var res api.BatchTickResponse
		code, err := d.do(ctx, "POST", "/v1/tick", `{}`, &res)
		if err == nil && code == 200 {
			led.mu.Lock()
			led.ticks += len(res.Results)
			for _, r := range res.Results {
				if r.Compaction != nil {
					led.compactions++
				}
			}
			led.mu.Unlock()
		}
		return err
	})
	worker("compact", func(rng *rand.Rand, i int) error {
		time.Sleep(time.Duration(50+rng.IntN(150)) * time.Millisecond)
		id := stableNPCs[rng.IntN(len(stableNPCs))]
		var rec *json.RawMessage
		code, err := d.do(ctx, "POST", "/v1/npcs/"+id+"/compact", `{}`, &rec)
		if err == nil && code == 200 && rec != nil && string(*rec) != "null" {
			led.count(&led.compactions)
		}
		return err
	})
	worker("sleep", func(rng *rand.Rand, i int) error {
		time.Sleep(time.Duration(30+rng.IntN(120)) * time.Millisecond)
		all := append(slices.Clone(stableNPCs), ephemeralNPCs...)
		code, err := d.do(ctx, "POST", "/v1/npcs/"+all[rng.IntN(len(all))]+"/sleep", `{}`, nil)
		if err == nil && code == 200 {
			led.count(&led.sleeps)
		}
		return err
	})
	for _, id := range ephemeralNPCs {
		worker("life-"+id, func(rng *rand.Rand, i int) error {
			code, err := d.do(ctx, "GET", "/v1/npcs/"+id, "", nil)
			if err != nil {
				return err
			}
			if code == 404 {
				led.mu.Lock()
				led.pendingOp[id] = "create"
				led.mu.Unlock()
				if _, err := d.do(ctx, "PUT", "/v1/npcs/"+id, npcBody, nil); err != nil {
					return err
				}
				led.mu.Lock()
				delete(led.pendingOp, id)
				led.mu.Unlock()
			}
			for j := 0; j < 1+rng.IntN(3); j++ {
				ref := fmt.Sprintf("r%d-%s-%d-%d", round, id, i, j)
				var acc api.EventsAccepted
				body := fmt.Sprintf(`{"events": [{"id": %q, "kind": "say", "actor": "bob", "text": "Brom, I promise to pay %d silver (%s)."}]}`, ref, j, ref)
				code, err := d.do(ctx, "POST", "/v1/npcs/"+id+"/events", body, &acc)
				if err != nil {
					led.mu.Lock()
					led.unsure[ref] = true
					led.mu.Unlock()
					return err
				}
				if code == 202 && acc.Accepted == 1 {
					led.accept(id, ref)
				} else if code == 202 {
					led.problem("%s: a new event was answered %+v", id, acc)
				}
			}
			time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
			led.mu.Lock()
			led.pendingOp[id] = "delete"
			led.mu.Unlock()
			code, err = d.do(ctx, "DELETE", "/v1/npcs/"+id, "", nil)
			if err != nil {
				return err
			}
			led.mu.Lock()
			delete(led.pendingOp, id)
			led.mu.Unlock()
			if code == 204 {
				led.endLife(id)
				led.count(&led.deletes)
			}
			return nil
		})
	}
}

// checkDatabase opens the file the killed daemon left and checks it
// against the ledger. With final, no accepted event may still be pending.
func checkDatabase(t *testing.T, path string, led *ledger, final bool) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	var integrity string
	if err := db.Raw("PRAGMA integrity_check").Row().Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check: %q %v", integrity, err)
	}
	for _, table := range []string{"messages", "events", "profiles", "facts", "tick_records", "entries", "memories", "memory_revs", "compactions"} {
		var n int64
		if err := db.Raw("SELECT count(*) FROM " + table + " WHERE character_id NOT IN (SELECT id FROM characters)").Row().Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Errorf("%d rows of %s belong to no NPC", n, table)
		}
	}
	var dups int64
	if err := db.Raw(`SELECT count(*) FROM (SELECT character_id, content_hash FROM memories WHERE superseded_at IS NULL
		GROUP BY character_id, content_hash HAVING count(*) > 1)`).Row().Scan(&dups); err != nil {
		t.Fatal(err)
	}
	if dups > 0 {
		t.Errorf("%d memories are stored twice", dups)
	}
	var ids []string
	if err := db.Raw("SELECT id FROM characters").Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, id := range ids {
		exists[id] = true
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	// An ephemeral NPC's create or delete without an answer: the file
	// says which way it went.
	for id, op := range led.pendingOp {
		switch {
		case op == "delete" && !exists[id]:
			for ref := range led.events[id] {
				led.gone[ref] = true
			}
			delete(led.events, id)
			led.deletes++
		case op == "create" && exists[id]:
			// A new, empty life.
		}
		delete(led.pendingOp, id)
	}
	led.consumed, led.pending, led.lost = 0, 0, 0
	for _, id := range append(slices.Clone(stableNPCs), ephemeralNPCs...) {
		rows, inMessages := storedEvents(t, db, id)
		stored := map[string]eventRow{}
		for _, r := range rows {
			stored[r.Ref] = r
			if led.gone[r.Ref] {
				t.Errorf("%s holds event %q of an earlier life", id, r.Ref)
			}
			if !led.events[id][r.Ref] && !led.unsure[r.Ref] {
				t.Errorf("%s holds event %q nobody posted to it", id, r.Ref)
			}
			switch n := inMessages[r.Ref]; {
			case r.ConsumedAt == nil && n != 0:
				t.Errorf("%s: event %q is pending but in %d messages", id, r.Ref, n)
			case r.ConsumedAt != nil && (n != 1 || r.MessageID == nil):
				t.Errorf("%s: event %q is consumed into %d messages (message %v), want exactly 1", id, r.Ref, n, r.MessageID)
			}
		}
		for ref := range inMessages {
			if _, ok := stored[ref]; !ok {
				t.Errorf("%s: a message cites event %q, which is not stored", id, ref)
			}
		}
		if !exists[id] {
			if len(rows) > 0 || len(inMessages) > 0 {
				t.Errorf("deleted %s still has %d events and %d messages citing events", id, len(rows), len(inMessages))
			}
			if len(led.events[id]) > 0 {
				t.Errorf("%s is gone but no delete was answered; %d accepted events lost", id, len(led.events[id]))
				led.lost += len(led.events[id])
			}
			continue
		}
		for ref := range led.events[id] {
			r, ok := stored[ref]
			switch {
			case !ok:
				t.Errorf("%s lost accepted event %q", id, ref)
				led.lost++
			case r.ConsumedAt == nil:
				led.pending++
				if final {
					t.Errorf("%s: accepted event %q is still pending after the inboxes drained", id, ref)
				}
			default:
				led.consumed++
			}
		}
	}
	if final && led.lost == 0 && led.pending == 0 && led.consumed == 0 {
		t.Error("no event was consumed at all")
	}
}

// eventRow is an event as stored: consumed (and by which message) or not.
type eventRow struct {
	Ref        string
	ConsumedAt *time.Time
	MessageID  *int64
}

// storedEvents reads NPC id's events that carry a ref, and how many of
// its live user messages carry each ref.
func storedEvents(t *testing.T, db *gorm.DB, id string) ([]eventRow, map[string]int) {
	t.Helper()
	var rows []eventRow
	if err := db.Raw("SELECT ref, consumed_at, message_id FROM events WHERE character_id = ? AND ref IS NOT NULL", id).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	var msgRefs []string
	if err := db.Raw("SELECT event_refs FROM messages WHERE character_id = ? AND role = 'user' AND summary = ?", id, false).Scan(&msgRefs).Error; err != nil {
		t.Fatal(err)
	}
	inMessages := map[string]int{}
	for _, raw := range msgRefs {
		var refs []string
		if raw != "" && raw != "null" {
			if err := json.Unmarshal([]byte(raw), &refs); err != nil {
				t.Fatalf("event_refs %q: %v", raw, err)
			}
		}
		for _, r := range refs {
			inMessages[r]++
		}
	}
	return rows, inMessages
}
