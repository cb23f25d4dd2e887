package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/npcd/npcd/api"
	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
)

// LifeOptions are what one run of Life drives.
type LifeOptions struct {
	Events   int  // events of the whole life, each followed by a tick
	Nights   int  // game days the events spread over; the NPC sleeps after each
	Window   int  // context window of the NPC
	ObsBytes int  // size of each look or stock observation
	CacheMB  int  // bound of the memory search's index cache, MiB (NPCD_INDEX_CACHE_MB)
	HTTP     bool // through the daemon on a loopback port
	JSON     bool // one JSON object per tenth, then the summary
	// CPUProfile, when set, names a file for a CPU profile of the whole
	// life (in-process: the daemon's work and the driver's together).
	CPUProfile string
}

// Check refuses bad options, naming the flag of npcd bench life.
func (o LifeOptions) Check() error {
	switch {
	case o.Events < 10:
		return fmt.Errorf("--events must be at least 10: the life is reported per tenth")
	case o.Nights < 1 || o.Nights > o.Events:
		return fmt.Errorf("--nights must be between 1 and --events (%d)", o.Events)
	case o.Window < character.MinContextWindow || o.Window > character.MaxContextWindow:
		return fmt.Errorf("--window must be between %d and %d", character.MinContextWindow, character.MaxContextWindow)
	case o.ObsBytes < 1:
		return fmt.Errorf("--observation-bytes must be at least 1")
	case o.CacheMB < 1 || o.CacheMB > 1<<20:
		return fmt.Errorf("--index-cache-mb must be between 1 and 1048576")
	}
	return nil
}

// LifeTenth is one tenth of the life, as --json prints it (kind "tenth").
// The figures after Events cover the ticks of the tenth; those after
// SleepMS are read at its end, after its last night's sleep.
type LifeTenth struct {
	Kind      string  `json:"kind"`
	Tenth     int     `json:"tenth"` // 1 to 10
	Events    int     `json:"events"`
	Day       int     `json:"day"` // game day of the tenth's last event, from 1
	Ticks     int     `json:"ticks"`
	TicksPerS float64 `json:"ticks_per_s"` // over the tenth's wall time less its sleeps
	// P50MS and P99MS are the latencies of the tick calls (over HTTP,
	// the tick requests), the builtin model's time included.
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	// CPUMSPerTick is the process's CPU time over the tenth less that of
	// its sleeps, per tick (over HTTP, daemon and client together).
	CPUMSPerTick        float64 `json:"cpu_ms_per_tick"`
	PromptTokensPerTick float64 `json:"prompt_tokens_per_tick"`
	// EmergencyCompactions are the compactions the ticks ran (past the
	// emergency threshold, or to recover from an overflow).
	EmergencyCompactions int `json:"emergency_compactions"`
	// BackgroundCompactions are those begun beside the ticks (one left
	// the context close to the emergency threshold), whether they ended
	// beside them or a tick that needed them finished them.
	BackgroundCompactions int     `json:"background_compactions"`
	Sleeps                int     `json:"sleeps"`
	SleepCompactions      int     `json:"sleep_compactions"`
	SleepMS               float64 `json:"sleep_ms"` // mean wall time of a sleep
	LiveMessages          int     `json:"live_messages"`
	ArchivedMessages      int     `json:"archived_messages"`
	HeapInuseMiB          float64 `json:"heap_inuse_mib"`
	RSSMiB                float64 `json:"rss_mib"`
	IndexCacheMiB         float64 `json:"index_cache_mib"`
}

// LifeSummary closes a life's report (kind "summary").
type LifeSummary struct {
	Kind   string `json:"kind"`
	Mode   string `json:"mode"` // in-process or http
	Events int    `json:"events"`
	Nights int    `json:"nights"`
	Window int    `json:"window"`
	// IndexCacheMB is the index cache's budget as the app reports it.
	IndexCacheMB float64 `json:"index_cache_mb"`
	Ticks        int     `json:"ticks"`
	Sleeps       int     `json:"sleeps"`
	ElapsedS     float64 `json:"elapsed_s"`
	// The ratios are the last tenth's figure over the first's.
	CPURatio    float64 `json:"cpu_ms_per_tick_ratio"`
	P50Ratio    float64 `json:"p50_ratio"`
	PromptRatio float64 `json:"prompt_tokens_ratio"`
	// TickFlat and PromptFlat say whether the CPU time and the prompt
	// tokens per tick of the last tenth are within 1.2x of the first's.
	TickFlat   bool    `json:"tick_flat"`
	PromptFlat bool    `json:"prompt_flat"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	DBMiB      float64 `json:"db_mib"`
	WALMiB     float64 `json:"wal_mib"`
}

// lifeFlat is how much a figure of the last tenth may exceed the first's
// and still count as flat.
const lifeFlat = 1.2

// lifeNPC drives the one NPC of a life: in-process through the engine or
// through the daemon's HTTP API.
type lifeNPC interface {
	post(ctx context.Context, ev tick.EventInput) error
	tick(ctx context.Context) (*tick.Result, error)
	results(ctx context.Context, rs []tick.ToolResult) error
	sleep(ctx context.Context) (*sleep.Report, error)
	context(ctx context.Context) (tick.Context, error)
	sizes(ctx context.Context) (lifeSizes, error)
}

// lifeSizes are what the app reports of its database and its search index
// cache, in bytes.
type lifeSizes struct {
	db, wal    int64 // the database and its write-ahead log (0 for none)
	cache      int64 // held by the index cache
	cacheLimit int64 // its budget, as the app was given it
}

const lifeID = "hilda"

// lifeCharacter is the innkeeper, with look and inventory as game tools
// whose results the game posts back.
func lifeCharacter(window int) *character.Character {
	c := &character.Character{ID: lifeID, Name: "Hilda",
		Persona:       "You are Hilda, the cheerful innkeeper of the Gilded Goose in Millbrook. You know every regular by name and you keep their secrets.",
		ContextWindow: window}
	if window < 4096 { // as Masking: the default reply does not fit a small window
		c.MaxOutputTokens = window / 10
	}
	c.Tools = store.NewJSON(append(character.DefaultTools(),
		character.ToolSpec{Name: "look", Description: "Look around the common room; the game describes what you see.", Parameters: map[string]any{"type": "object"}, Returns: true},
		character.ToolSpec{Name: "inventory", Description: "Check the stock behind the bar; the game lists it.", Parameters: map[string]any{"type": "object"}, Returns: true}))
	return c
}

type engineNPC struct{ w *World }

func (n engineNPC) post(ctx context.Context, ev tick.EventInput) error {
	_, _, err := n.w.Engine.PostEvents(ctx, lifeID, []tick.EventInput{ev})
	return err
}
func (n engineNPC) tick(ctx context.Context) (*tick.Result, error) {
	return n.w.Engine.Tick(ctx, lifeID)
}
func (n engineNPC) results(ctx context.Context, rs []tick.ToolResult) error {
	return n.w.Engine.PostToolResults(ctx, lifeID, rs)
}
func (n engineNPC) sleep(ctx context.Context) (*sleep.Report, error) {
	return n.w.Engine.Sleep(ctx, lifeID)
}
func (n engineNPC) context(ctx context.Context) (tick.Context, error) {
	c, err := n.w.Chars.Get(ctx, lifeID)
	if err != nil {
		return tick.Context{}, err
	}
	return tick.ContextOf(c), nil
}
func (n engineNPC) sizes(ctx context.Context) (lifeSizes, error) {
	var s lifeSizes
	if n.w.Sizes != nil {
		var err error
		if s.db, s.wal, err = n.w.Sizes(ctx); err != nil {
			return s, err
		}
	}
	st := n.w.Retriever.CacheStats()
	s.cache, s.cacheLimit = st.Bytes, st.Limit
	return s, nil
}

type httpNPC struct {
	c    *api.Client
	hc   *http.Client
	base string
}

func (n httpNPC) post(ctx context.Context, ev tick.EventInput) error {
	_, err := n.c.PostEvents(ctx, lifeID, []api.Event{ev})
	return err
}
func (n httpNPC) tick(ctx context.Context) (*tick.Result, error) { return n.c.Tick(ctx, lifeID) }
func (n httpNPC) results(ctx context.Context, rs []tick.ToolResult) error {
	return n.c.PostToolResults(ctx, lifeID, rs)
}
func (n httpNPC) sleep(ctx context.Context) (*sleep.Report, error) { return n.c.Sleep(ctx, lifeID) }
func (n httpNPC) context(ctx context.Context) (tick.Context, error) {
	npc, err := n.c.GetNPC(ctx, lifeID)
	if err != nil {
		return tick.Context{}, err
	}
	return npc.Context, nil
}

// sizes reads the daemon's gauges on GET /metrics.
func (n httpNPC) sizes(ctx context.Context) (lifeSizes, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.base+"/metrics", nil)
	if err != nil {
		return lifeSizes{}, err
	}
	resp, err := n.hc.Do(req)
	if err != nil {
		return lifeSizes{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return lifeSizes{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	g := map[string]int64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		switch name {
		case "npcd_database_size_bytes", "npcd_db_wal_bytes", "npcd_index_cache_bytes", "npcd_index_cache_limit_bytes":
			if f, err := strconv.ParseFloat(value, 64); ok && err == nil {
				g[name] = int64(f)
			}
		}
	}
	return lifeSizes{db: g["npcd_database_size_bytes"], wal: g["npcd_db_wal_bytes"], cache: g["npcd_index_cache_bytes"],
		cacheLimit: g["npcd_index_cache_limit_bytes"]}, sc.Err()
}

// The tavern: seven regulars, their talk, and the game's long answers.
var (
	lifeRegulars = []string{"Wren", "Orrin", "Sela", "Tomas", "Brindle", "Ysolde", "Garrick"}
	lifeLines    = []string{
		"Another round for my friends here, and put it on my tab.",
		"The road from Harrowdale was all mud again; my cart lost a wheel.",
		"Is there anything hot left in the kitchen?",
		"Did you hear about the new bridge toll? Nobody likes it.",
		"The drovers say sheep are cheap in the east this year.",
		"My room upstairs is cold; could I have another blanket?",
	}
	lifeRoom = "The common room of the Gilded Goose is full tonight. A fire roars in the wide stone hearth and throws long shadows over the oak beams, " +
		"where strings of onions, dried sage and a smoked ham hang out of reach of the dogs. At the long table by the window three drovers argue about " +
		"the price of wool at the Millbrook fair. In the corner booth a hooded traveller nurses a cup of mulled wine and watches the door. "
	lifeStock = "Behind the bar: four kegs of brown ale (one nearly empty), two kegs of pale cider, a cask of Harrowdale red wine, eleven clean tankards " +
		"and six dirty ones, a crock of salt pork, three loaves of rye bread and half a wheel of sharp cheese, a basket of winter apples, a jar of honey. "
)

// lifeEvent is the i-th event of the life: every third asks the innkeeper
// to look around or check her stock, now and then someone tells a fact
// (a name, a debt), else a regular talks.
func lifeEvent(i int) tick.EventInput {
	who := lifeRegulars[(i*5+i/7)%len(lifeRegulars)]
	switch {
	case i%97 == 11:
		f := benchFact(i / 97)
		return tick.EventInput{Kind: "say", Actor: f.who, Text: fmt.Sprintf("My name is %s, and I'll be staying the week. I owe you %d crowns for the last one.", f.who, 3+(i/97)%40)}
	case i%3 == 0 && (i/3)%2 == 0:
		return tick.EventInput{Kind: "say", Actor: who, Text: "Could you look around and tell me who came in?"}
	case i%3 == 0:
		return tick.EventInput{Kind: "say", Actor: who, Text: "What do you have in your inventory tonight?"}
	}
	return tick.EventInput{Kind: "say", Actor: who, Text: lifeLines[(i/3+i)%len(lifeLines)]}
}

// lifeStart is the game time of the life's first morning.
var lifeStart = time.Date(2026, 4, 10, 0, 0, 0, 0, time.UTC)

// Life drives one innkeeper through a long life: o.Events events spread
// over o.Nights game days, each followed by a tick (and the ticks that
// answer her look and stock calls), a sleep after each day, and reports
// each tenth of the life and a summary.
func Life(ctx context.Context, out, progress io.Writer, h Harness, o LifeOptions) error {
	if err := o.Check(); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(o.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var npc lifeNPC
	mode := "in-process"
	c := lifeCharacter(o.Window)
	if o.HTTP {
		mode = "http"
		addr, stop, err := h.Serve(ctx, ServeOptions{IndexCacheMB: o.CacheMB})
		if err != nil {
			return err
		}
		defer stop()
		hc := &http.Client{Timeout: 5 * time.Minute}
		client := api.NewClient("http://"+addr, "", hc)
		var tools []api.Tool
		for _, t := range c.Tools.V {
			tools = append(tools, api.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Returns: t.Returns})
		}
		if _, _, err := client.PutNPC(ctx, lifeID, api.NPCSettings{Name: c.Name, Persona: c.Persona, ContextWindow: c.ContextWindow,
			MaxOutputTokens: c.MaxOutputTokens, Tools: tools}); err != nil {
			return err
		}
		npc = httpNPC{c: client, hc: hc, base: "http://" + addr}
	} else {
		w, done, err := h.Open(ctx, Options{IndexCacheMB: o.CacheMB})
		if err != nil {
			return err
		}
		defer done()
		if _, err := w.Engine.PutNPC(ctx, c); err != nil {
			return err
		}
		npc = engineNPC{w: w}
	}
	if !o.JSON {
		fmt.Fprintf(out, "one innkeeper's life (%s, builtin model): %d events over %d game days, a sleep each night, window %d, observations of %d bytes, index cache %d MiB (e-cmp, b-cmp, s-cmp: compactions of the ticks, beside them, of the sleeps)\n",
			mode, o.Events, o.Nights, o.Window, o.ObsBytes, o.CacheMB)
		fmt.Fprintf(out, "  %5s %7s %4s %7s %8s %7s %7s %8s %8s %5s %5s %6s %5s %8s %6s %8s %8s %8s %9s\n",
			"tenth", "events", "day", "ticks", "ticks/s", "p50 ms", "p99 ms", "cpu ms/t", "prompt/t", "e-cmp", "b-cmp", "sleeps", "s-cmp", "sleep ms",
			"live", "archived", "heap MiB", "RSS MiB", "cache MiB")
	}
	room := observation(lifeRoom, o.ObsBytes)
	stock := observation(lifeStock, o.ObsBytes)

	var tenths []LifeTenth
	var cur LifeTenth
	var lat []time.Duration
	var prompt int
	var sleepWall, sleepCPU time.Duration
	start := time.Now()
	tenthStart, cpu0 := start, cpuTime()
	closeTenth := func(day int) error {
		wall := time.Since(tenthStart) - sleepWall
		cpu := cpuTime() - cpu0 - sleepCPU
		slices.Sort(lat)
		cur.Kind, cur.Tenth, cur.Day = "tenth", len(tenths)+1, day+1
		if cur.Ticks > 0 {
			cur.TicksPerS = float64(cur.Ticks) / wall.Seconds()
			cur.P50MS, cur.P99MS = msOf(quantile(lat, 0.50)), msOf(quantile(lat, 0.99))
			cur.CPUMSPerTick = msOf(cpu) / float64(cur.Ticks)
			cur.PromptTokensPerTick = float64(prompt) / float64(cur.Ticks)
		}
		if cur.Sleeps > 0 {
			cur.SleepMS = msOf(sleepWall) / float64(cur.Sleeps)
		}
		cx, err := npc.context(ctx)
		if err != nil {
			return err
		}
		cur.LiveMessages, cur.ArchivedMessages = cx.LiveMessages, cx.ArchivedMessages
		sz, err := npc.sizes(ctx)
		if err != nil {
			return err
		}
		var ms1 runtime.MemStats
		runtime.ReadMemStats(&ms1)
		rss, _ := procStatus("VmRSS")
		cur.HeapInuseMiB, cur.RSSMiB, cur.IndexCacheMiB = mib(int64(ms1.HeapInuse)), mib(rss), mib(sz.cache)
		if o.JSON {
			if err := json.NewEncoder(out).Encode(cur); err != nil {
				return err
			}
		} else {
			t := cur
			fmt.Fprintf(out, "  %5d %7d %4d %7d %8.0f %7.2f %7.2f %8.3f %8.0f %5d %5d %6d %5d %8.1f %6d %8d %8.1f %8.1f %9.1f\n",
				t.Tenth, t.Events, t.Day, t.Ticks, t.TicksPerS, t.P50MS, t.P99MS, t.CPUMSPerTick, t.PromptTokensPerTick, t.EmergencyCompactions, t.BackgroundCompactions,
				t.Sleeps, t.SleepCompactions, t.SleepMS, t.LiveMessages, t.ArchivedMessages, t.HeapInuseMiB, t.RSSMiB, t.IndexCacheMiB)
		}
		tenths = append(tenths, cur)
		cur, lat, prompt, sleepWall, sleepCPU = LifeTenth{}, lat[:0], 0, 0, 0
		tenthStart, cpu0 = time.Now(), cpuTime()
		return nil
	}

	ticks, sleeps, lastDay := 0, 0, 0
	// compactions is the NPC's count of compactions as last seen, -1
	// before the first tick.
	compactions := -1
	for day := 0; day < o.Nights; day++ {
		lo, hi := day*o.Events/o.Nights, (day+1)*o.Events/o.Nights
		dayStart := lifeStart.AddDate(0, 0, day)
		for i := lo; i < hi; i++ {
			if i > 0 && i*10/o.Events != (i-1)*10/o.Events {
				if err := closeTenth(lastDay); err != nil {
					return err
				}
			}
			lastDay = day
			ev := lifeEvent(i)
			// The day's events from 10:00 to 23:00 of its game day.
			ev.At = dayStart.Add(10*time.Hour + time.Duration(i-lo)*13*time.Hour/time.Duration(hi-lo))
			if err := npc.post(ctx, ev); err != nil {
				return fmt.Errorf("event %d: %w", i, err)
			}
			cur.Events++
			for {
				t0 := time.Now()
				res, err := npc.tick(ctx)
				if err != nil {
					return fmt.Errorf("tick after event %d: %w", i, err)
				}
				lat = append(lat, time.Since(t0))
				if res.Idle {
					break
				}
				cur.Ticks++
				ticks++
				prompt += res.Usage.PromptTokens
				switch {
				case res.Compaction == nil:
				case res.Compaction.Trigger == sleep.TriggerBackground:
					// Begun beside the ticks, finished by this one.
					cur.BackgroundCompactions++
				default:
					cur.EmergencyCompactions++
				}
				// The NPC's count of compactions tells those beside the
				// ticks, which no tick reports: what it gained since the
				// last tick beyond this tick's own.
				cur.BackgroundCompactions += besideSince(compactions, res)
				compactions = res.Context.Compactions
				if len(res.Awaiting) == 0 {
					break
				}
				tools := map[string]string{}
				for _, a := range res.Actions {
					tools[a.CallID] = a.Tool
				}
				var rs []tick.ToolResult
				for _, id := range res.Awaiting {
					content := room
					if tools[id] == "inventory" {
						content = stock
					}
					rs = append(rs, tick.ToolResult{CallID: id, Content: content})
				}
				if err := npc.results(ctx, rs); err != nil {
					return fmt.Errorf("tool results after event %d: %w", i, err)
				}
			}
		}
		// Bedtime: the sleep a schedule or POST /v1/npcs/{npc}/sleep runs.
		t0, c0 := time.Now(), cpuTime()
		rep, err := npc.sleep(ctx)
		if err != nil {
			return fmt.Errorf("sleep of night %d: %w", day+1, err)
		}
		sleepWall += time.Since(t0)
		sleepCPU += cpuTime() - c0
		cur.Sleeps++
		sleeps++
		if rep.Compaction != nil {
			cur.SleepCompactions++
			if compactions >= 0 {
				compactions++
			}
		}
		if progress != nil && !o.JSON && (day+1)%10 == 0 {
			fmt.Fprintf(progress, "\rlife: night %d/%d, %d/%d events", day+1, o.Nights, hi, o.Events)
		}
	}
	if progress != nil && !o.JSON && o.Nights >= 10 {
		fmt.Fprintln(progress)
	}
	if err := closeTenth(o.Nights - 1); err != nil {
		return err
	}

	sz, err := npc.sizes(ctx)
	if err != nil {
		return err
	}
	peak, err := procStatus("VmHWM")
	if err != nil {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		peak = ru.Maxrss << 10 // KiB on Linux
	}
	first, last := tenths[0], tenths[len(tenths)-1]
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return float64(int(a/b*1000+0.5)) / 1000
	}
	s := LifeSummary{Kind: "summary", Mode: mode, Events: o.Events, Nights: o.Nights, Window: o.Window, IndexCacheMB: mib(sz.cacheLimit),
		Ticks: ticks, Sleeps: sleeps, ElapsedS: float64(time.Since(start).Milliseconds()) / 1000,
		CPURatio: ratio(last.CPUMSPerTick, first.CPUMSPerTick), P50Ratio: ratio(last.P50MS, first.P50MS),
		PromptRatio: ratio(last.PromptTokensPerTick, first.PromptTokensPerTick),
		PeakRSSMiB:  mib(peak), DBMiB: mib(sz.db), WALMiB: mib(sz.wal)}
	s.TickFlat, s.PromptFlat = s.CPURatio <= lifeFlat, s.PromptRatio <= lifeFlat
	if o.JSON {
		return json.NewEncoder(out).Encode(s)
	}
	verdict := func(ok bool) string {
		if ok {
			return "flat"
		}
		return "NOT flat"
	}
	fmt.Fprintf(out, "  last tenth / first: cpu ms per tick %.2fx (%s, target ≤ %.1fx), p50 %.2fx, prompt tokens per tick %.0f → %.0f (%.3fx, %s)\n",
		s.CPURatio, verdict(s.TickFlat), lifeFlat, s.P50Ratio, first.PromptTokensPerTick, last.PromptTokensPerTick, s.PromptRatio, verdict(s.PromptFlat))
	fmt.Fprintf(out, "  %d ticks, %d sleeps in %.0f s; peak RSS %.0f MiB (index cache bound %.0f MiB); database %.1f MiB, write-ahead log %.1f MiB at the end\n",
		s.Ticks, s.Sleeps, s.ElapsedS, s.PeakRSSMiB, s.IndexCacheMB, s.DBMiB, s.WALMiB)
	return nil
}

// observation is text repeated and cut to n bytes.
func observation(text string, n int) string {
	return strings.Repeat(text, n/len(text)+1)[:n]
}

func mib(b int64) float64 { return float64(int(float64(b)/(1<<20)*10+0.5)) / 10 }

// procStatus reads a size in bytes from /proc/self/status (VmRSS, VmHWM).
func procStatus(field string) (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("%s not in /proc/self/status", field)
}
