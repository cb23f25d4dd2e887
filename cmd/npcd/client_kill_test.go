package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/npcd/npcd/tick"
)

// The game client of TestGameClientKilledResumesFromCursor is the test
// binary itself, started again with these variables set.
const (
	feedClientDir   = "NPCD_TEST_FEED_CLIENT"       // its directory: log and cursor files
	feedClientAddr  = "NPCD_TEST_FEED_ADDR"         // the daemon's address
	feedClientMode  = "NPCD_TEST_FEED_MODE"         // "stream" (SSE) or "poll" (long poll)
	feedClientLife  = "NPCD_TEST_FEED_LIFE"         // the number of this life, written to the log
	feedClientDie   = "NPCD_TEST_FEED_DIE"          // "n:where": SIGKILL itself at the n-th tick, "half" or "logged"
	feedClientUntil = "NPCD_TEST_FEED_UNTIL_CURSOR" // exit once the stored cursor reaches this
)

// TestGameClientKilledResumesFromCursor runs the game client as a separate
// process that follows the action feed (the SSE stream and the long poll,
// alternately from one life to the next) from a cursor stored in a file:
// it appends each delivered tick to a log, fsyncs it, and only then stores
// the cursor (a temporary file renamed over it). Meanwhile the game posts
// events and ticks NPCs against one real daemon, and the client is
// SIGKILLed at random moments, and also by itself halfway through writing
// a log line and between writing the log and storing the cursor. In the
// end every tick the daemon committed is in the client's log, with the
// cursor the feed gives it; within each life of the client each NPC's
// ticks come in order; the first deliveries of each NPC are its ticks 1, 2,
// 3, ... with no gap; duplicates (a tick delivered again after a restart)
// are allowed and counted by (npc, tick).
func TestGameClientKilledResumesFromCursor(t *testing.T) {
	if dir := os.Getenv(feedClientDir); dir != "" {
		if err := runFeedClient(dir); err != nil {
			fmt.Fprintln(os.Stderr, "feed client:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	seed := *killSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, 0x636c69))
	t.Logf("seed %d (-kill.seed to replay the client's lives)", seed)
	bin := buildDaemon(t)
	d := startBinary(t, bin, filepath.Join(t.TempDir(), "npcd.db"))
	npcs := []string{"brom", "mira", "olaf", "hilda", "ysolde", "gareth"}
	for _, id := range npcs {
		d.put(t, id)
	}
	dir := t.TempDir()

	// The game: events and ticks for every NPC until told to stop.
	var (
		mu       sync.Mutex
		answered = map[string]bool{} // npc/tick of the non-idle answers the game got
		gameErr  error
	)
	ctx, stopGame := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, id := range npcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf(`{"events": [{"id": "%s-%d", "kind": "say", "actor": "alice", "text": "Tell me about iron, %d."}]}`, id, i, i)
				code, err := d.do(ctx, "POST", "/v1/npcs/"+id+"/events", body, nil)
				if err == nil && code != http.StatusAccepted {
					err = fmt.Errorf("events for %s: %d", id, code)
				}
				var r tick.Result
				if err == nil {
					code, err = d.do(ctx, "POST", "/v1/npcs/"+id+"/tick", "", &r)
					if err == nil && code != http.StatusOK {
						err = fmt.Errorf("tick %s: %d", id, code)
					}
				}
				mu.Lock()
				if err != nil {
					if ctx.Err() == nil && gameErr == nil {
						gameErr = err
					}
					mu.Unlock()
					return
				}
				if !r.Idle {
					answered[fmt.Sprintf("%s/%d", r.NPC, r.Tick)] = true
				}
				mu.Unlock()
			}
		}()
	}

	// The client: started, killed at a random moment (or killing itself
	// mid-write), started again from its stored cursor.
	const lives = 10
	var (
		kills, selfKills int
		modes            = [2]string{"stream", "poll"}
	)
	for life := range lives {
		env := []string{feedClientMode + "=" + modes[life%2], feedClientLife + "=" + strconv.Itoa(life)}
		self := life%3 == 2
		if self {
			where := [2]string{"half", "logged"}[(life/3)%2]
			env = append(env, fmt.Sprintf("%s=%d:%s", feedClientDie, 1+rng.IntN(20), where))
		}
		c := startFeedClient(t, dir, d.addr, env...)
		if self {
			select {
			case err := <-c.done:
				if !killedBySIGKILL(err) {
					t.Fatalf("life %d: the client was to SIGKILL itself, it ended with %v\n%s", life, err, c.stderr.String())
				}
				selfKills++
				continue
			case <-time.After(20 * time.Second):
				// Too few ticks reached it: killed from outside instead.
			}
		} else {
			time.Sleep(time.Duration(50+rng.IntN(450)) * time.Millisecond)
		}
		c.kill(t)
		kills++
	}
	stopGame()
	wg.Wait()
	if gameErr != nil {
		t.Fatalf("the game: %v\n%s", gameErr, d.logTail())
	}

	// Everything the daemon committed, read from the start of the feed.
	var committed []tick.FeedTick
	for after := int64(0); ; {
		var f tick.Feed
		if code := d.call(t, "GET", fmt.Sprintf("/v1/actions?after=%d&limit=1000", after), "", &f); code != http.StatusOK {
			t.Fatalf("GET /v1/actions = %d", code)
		}
		if len(f.Ticks) == 0 {
			break
		}
		committed = append(committed, f.Ticks...)
		after = f.Cursor
	}
	if len(committed) == 0 {
		t.Fatal("the daemon committed no tick: the test drove nothing")
	}
	last := committed[len(committed)-1].Cursor

	// A last life catches up with the feed and exits by itself.
	c := startFeedClient(t, dir, d.addr, feedClientMode+"="+modes[lives%2], feedClientLife+"="+strconv.Itoa(lives),
		fmt.Sprintf("%s=%d", feedClientUntil, last))
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("the last life of the client: %v\n%s", err, c.stderr.String())
		}
	case <-time.After(2 * time.Minute):
		c.kill(t)
		t.Fatalf("the last life of the client did not reach cursor %d within two minutes\n%s", last, c.stderr.String())
	}
	d.stop(t)

	// The checks.
	cursorOf := map[string]int64{} // npc/tick → its cursor in the feed
	perNPC := map[string][]int64{}
	for _, ft := range committed {
		cursorOf[fmt.Sprintf("%s/%d", ft.NPC, ft.Tick)] = ft.Cursor
		perNPC[ft.NPC] = append(perNPC[ft.NPC], ft.Tick)
	}
	for id, ticks := range perNPC {
		for i, n := range ticks {
			if n != int64(i+1) {
				t.Fatalf("%s's committed ticks: %v, want 1, 2, 3, ... in order", id, ticks)
			}
		}
	}
	for k := range answered {
		if _, ok := cursorOf[k]; !ok {
			t.Errorf("tick %s answered to the game but not in the feed", k)
		}
	}
	log, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		delivered  = map[string]int{}
		firstOrder = map[string][]int64{} // npc → ticks in order of first delivery
		lastInLife = map[string]int64{}   // npc → last tick delivered in this life
		lifeCount  int
		lines      int
	)
	for _, line := range strings.Split(strings.TrimSuffix(string(log), "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "life" {
			lifeCount++
			clear(lastInLife)
			continue
		}
		if len(f) != 3 {
			t.Fatalf("log line %q: want \"npc tick cursor\" (a torn line must not survive a restart)", line)
		}
		npc := f[0]
		n, err1 := strconv.ParseInt(f[1], 10, 64)
		cur, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("log line %q: %v %v", line, err1, err2)
		}
		lines++
		k := npc + "/" + f[1]
		want, ok := cursorOf[k]
		if !ok {
			t.Fatalf("log line %q: the client got tick %s, which the daemon never committed", line, k)
		}
		if cur != want {
			t.Errorf("tick %s delivered with cursor %d, the feed says %d", k, cur, want)
		}
		if prev, ok := lastInLife[npc]; ok && n <= prev {
			t.Errorf("life %d: %s's tick %d delivered after its tick %d", lifeCount-1, npc, n, prev)
		}
		lastInLife[npc] = n
		if delivered[k] == 0 {
			firstOrder[npc] = append(firstOrder[npc], n)
		}
		delivered[k]++
	}
	if lifeCount != lives+1 {
		t.Errorf("the log holds %d lives of the client, want %d", lifeCount, lives+1)
	}
	missing, duplicates := 0, 0
	for _, ft := range committed {
		k := fmt.Sprintf("%s/%d", ft.NPC, ft.Tick)
		switch n := delivered[k]; {
		case n == 0:
			missing++
			if missing <= 10 {
				t.Errorf("tick %s (cursor %d) committed, never delivered to the client", k, ft.Cursor)
			}
		case n > 1:
			duplicates += n - 1
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d committed ticks never delivered", missing, len(committed))
	}
	for id, ticks := range firstOrder {
		for i, n := range ticks {
			if n != int64(i+1) {
				t.Fatalf("%s's ticks in order of first delivery: %v, want 1, 2, 3, ... with no gap", id, ticks)
			}
		}
	}
	t.Logf("%d lives of the client (%d SIGKILLed at random moments, %d by itself mid-write), %d answers to the game; "+
		"%d ticks committed, %d deliveries logged, all %d delivered, %d duplicates",
		lives+1, kills, selfKills, len(answered), len(committed), lines, len(committed), duplicates)
}

// feedClient is one life of the game client process.
type feedClient struct {
	cmd    *exec.Cmd
	done   chan error
	stderr bytes.Buffer
}

func startFeedClient(t *testing.T, dir, addr string, env ...string) *feedClient {
	t.Helper()
	c := &feedClient{done: make(chan error, 1)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestGameClientKilledResumesFromCursor$")
	c.cmd.Env = append(os.Environ(), feedClientDir+"="+dir, feedClientAddr+"="+addr)
	c.cmd.Env = append(c.cmd.Env, env...)
	c.cmd.Stderr = &c.stderr
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c.cmd.Stdout = w
	err = c.cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() { c.cmd.Process.Kill() })
	// It says "ready" once its life is in the log, so that every life,
	// however soon killed, is there.
	if line, err := bufio.NewReader(r).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the client did not start: %q %v %v\n%s", line, err, <-c.done, c.stderr.String())
	}
	return c
}

// kill SIGKILLs the client and waits for it to be gone. A client that had
// already ended by then failed.
func (c *feedClient) kill(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Kill()
	if err := <-c.done; !killedBySIGKILL(err) {
		t.Fatalf("the client ended before it was killed: %v\n%s", err, c.stderr.String())
	}
}

func killedBySIGKILL(err error) bool {
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// runFeedClient is the game client: it follows the feed from its stored
// cursor, logs each tick (npc, tick, cursor) durably, then stores the
// cursor, until killed (or, with feedClientUntil, until it has caught up).
func runFeedClient(dir string) error {
	logPath, curPath := filepath.Join(dir, "log"), filepath.Join(dir, "cursor")
	cursor := int64(0)
	if b, err := os.ReadFile(curPath); err == nil {
		if cursor, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return fmt.Errorf("stored cursor %q: %v", b, err)
		}
	} else if !os.IsNotExist(err) {
		return err
	}
	log, err := os.OpenFile(logPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	// Recovery: a line torn by a kill is dropped (its tick comes again,
	// since the cursor was not stored past it).
	b, err := os.ReadFile(logPath)
	if err != nil {
		return err
	}
	keep := int64(bytes.LastIndexByte(b, '\n') + 1)
	if err := log.Truncate(keep); err != nil {
		return err
	}
	if _, err := log.Seek(keep, 0); err != nil {
		return err
	}
	mode := os.Getenv(feedClientMode)
	if _, err := fmt.Fprintf(log, "life %s %s %d\n", os.Getenv(feedClientLife), mode, cursor); err != nil {
		return err
	}
	if _, err := fmt.Println("ready"); err != nil {
		return err
	}
	until := int64(-1)
	if s := os.Getenv(feedClientUntil); s != "" {
		if until, err = strconv.ParseInt(s, 10, 64); err != nil {
			return err
		}
	}
	dieAt, dieWhere := 0, ""
	if s := os.Getenv(feedClientDie); s != "" {
		n, where, _ := strings.Cut(s, ":")
		if dieAt, err = strconv.Atoi(n); err != nil {
			return err
		}
		dieWhere = where
	}
	die := func() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	handled := 0
	// deliver logs one tick durably; the caller stores the cursor after.
	deliver := func(ft *tick.FeedTick) error {
		handled++
		line := fmt.Sprintf("%s %d %d\n", ft.NPC, ft.Tick, ft.Cursor)
		if handled == dieAt && dieWhere == "half" {
			if _, err := log.WriteString(line[:len(line)/2]); err != nil {
				return err
			}
			die()
		}
		if _, err := log.WriteString(line); err != nil {
			return err
		}
		if err := log.Sync(); err != nil {
			return err
		}
		if handled == dieAt && dieWhere == "logged" {
			die()
		}
		return nil
	}
	store := func(c int64) error {
		tmp := curPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(strconv.FormatInt(c, 10)), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, curPath); err != nil {
			return err
		}
		cursor = c
		return nil
	}
	base := "http://" + os.Getenv(feedClientAddr)
	hc := &http.Client{}
	for until < 0 || cursor < until {
		if mode == "poll" {
			resp, err := hc.Get(fmt.Sprintf("%s/v1/actions?after=%d&wait=2s&limit=5", base, cursor))
			if err != nil {
				return err
			}
			var f tick.Feed
			err = json.NewDecoder(resp.Body).Decode(&f)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET /v1/actions: %d %v", resp.StatusCode, err)
			}
			for i := range f.Ticks {
				if err := deliver(&f.Ticks[i]); err != nil {
					return err
				}
			}
			if err := store(f.Cursor); err != nil {
				return err
			}
			continue
		}
		req, err := http.NewRequest("GET", base+"/v1/actions/stream", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Last-Event-ID", strconv.FormatInt(cursor, 10))
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("GET /v1/actions/stream: %d", resp.StatusCode)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var id, data string
		for sc.Scan() && (until < 0 || cursor < until) {
			line := sc.Text()
			switch {
			case line == "":
				if data == "" {
					continue
				}
				var ft tick.FeedTick
				if err := json.Unmarshal([]byte(data), &ft); err != nil {
					resp.Body.Close()
					return fmt.Errorf("event %s: %v", id, err)
				}
				if strconv.FormatInt(ft.Cursor, 10) != id {
					resp.Body.Close()
					return fmt.Errorf("event id %s, its tick's cursor %d", id, ft.Cursor)
				}
				if err := deliver(&ft); err != nil {
					resp.Body.Close()
					return err
				}
				if err := store(ft.Cursor); err != nil {
					resp.Body.Close()
					return err
				}
				id, data = "", ""
			case strings.HasPrefix(line, "id: "):
				id = line[len("id: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			}
		}
		resp.Body.Close()
	}
	return log.Close()
}
