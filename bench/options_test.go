package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/tick"
)

// Every bad option is refused with an error naming its flag first.
func TestOptionsCheck(t *testing.T) {
	ticks := func(edit func(*TickOptions)) error {
		o := TickOptions{NPCs: []int{1}, Ticks: 10, Workers: 4, CacheMB: 128}
		edit(&o)
		return o.Check()
	}
	tokens := func(edit func(*TokenOptions)) error {
		o := TokenOptions{Turns: 10, Window: 8192, ObsBytes: 100, FactEvery: 5, SleepEvery: 10}
		edit(&o)
		return o.Check()
	}
	life := func(edit func(*LifeOptions)) error {
		o := LifeOptions{Events: 100, Nights: 10, Window: 8192, ObsBytes: 1200, CacheMB: 128}
		edit(&o)
		return o.Check()
	}
	if err := life(func(*LifeOptions) {}); err != nil {
		t.Fatalf("good life options refused: %v", err)
	}
	if err := ticks(func(*TickOptions) {}); err != nil {
		t.Fatalf("good tick options refused: %v", err)
	}
	if err := tokens(func(*TokenOptions) {}); err != nil {
		t.Fatalf("good token options refused: %v", err)
	}
	for _, c := range []struct {
		flag string
		err  error
	}{
		{"--ticks", ticks(func(o *TickOptions) { o.Ticks = 0 })},
		{"--npcs", ticks(func(o *TickOptions) { o.NPCs = []int{0} })},
		{"--npcs", ticks(func(o *TickOptions) { o.NPCs = nil })},
		{"--history", ticks(func(o *TickOptions) { o.History = []int{1000, -1} })},
		{"--sittings", ticks(func(o *TickOptions) { o.Sittings = -1 })},
		{"--sittings", ticks(func(o *TickOptions) { o.Sittings = 1001 })},
		{"--http", ticks(func(o *TickOptions) { o.HTTP, o.History = true, []int{1000} })},
		{"--others", ticks(func(o *TickOptions) { o.Others = -1 })},
		{"--latency", ticks(func(o *TickOptions) { o.Latency = -time.Second })},
		{"--workers", ticks(func(o *TickOptions) { o.Workers = 0 })},
		{"--rate", ticks(func(o *TickOptions) { o.Rate = -1 })},
		{"--rate", ticks(func(o *TickOptions) { o.HTTP, o.Rate = true, 100 })},
		{"--db", ticks(func(o *TickOptions) { o.DB = "./bench.db" })},
		{"--index-cache-mb", ticks(func(o *TickOptions) { o.CacheMB = 0 })},
		{"--http", ticks(func(o *TickOptions) { o.HTTP, o.Latency = true, time.Millisecond })},
		{"--http", ticks(func(o *TickOptions) { o.HTTP, o.Sittings = true, 2 })},
		{"--memprofile", ticks(func(o *TickOptions) { o.HTTP, o.MemProfile = true, "heap.pprof" })},
		{"--rounds", ticks(func(o *TickOptions) { o.HTTP, o.Rounds = true, true })},
		{"--turns", tokens(func(o *TokenOptions) { o.Turns = 0 })},
		{"--fact-every", tokens(func(o *TokenOptions) { o.FactEvery = 0 })},
		{"--observation-bytes", tokens(func(o *TokenOptions) { o.ObsBytes = 0 })},
		{"--sleep-every", tokens(func(o *TokenOptions) { o.SleepEvery = -1 })},
		{"--events", life(func(o *LifeOptions) { o.Events = 9 })},
		{"--nights", life(func(o *LifeOptions) { o.Nights = 0 })},
		{"--nights", life(func(o *LifeOptions) { o.Nights = 101 })},
		{"--window", life(func(o *LifeOptions) { o.Window = 1023 })},
		{"--observation-bytes", life(func(o *LifeOptions) { o.ObsBytes = 0 })},
		{"--index-cache-mb", life(func(o *LifeOptions) { o.CacheMB = 0 })},
	} {
		if c.err == nil || !strings.HasPrefix(c.err.Error(), c.flag+" ") {
			t.Errorf("%s: err %v, want one naming the flag", c.flag, c.err)
		}
	}
}

// keeper is a model that may keep a request's messages.
type keeper struct{ llm.Chatter }

// The bench's fake latency lends a request's messages to the model it
// wraps only when that model keeps none of them.
func TestTimedModelBorrowsOnlyWhatItsModelDoes(t *testing.T) {
	if _, ok := newTimedModel(llm.NewBuiltin(), 0).(llm.MessagesBorrower); !ok {
		t.Error("in front of the builtin model, which keeps nothing of a request, the timed model does not say so")
	}
	if _, ok := newTimedModel(keeper{llm.NewBuiltin()}, 0).(llm.MessagesBorrower); ok {
		t.Error("in front of a model that may keep a request's messages, the timed model says it keeps none")
	}
}

// Without latency the timed builtin model stands for the daemon's builtin
// model, which takes the engine's count of each prompt; with latency it
// stands for an endpoint, which reports its own usage, so the engine
// counts nothing for it; in front of a model that does not count, neither.
func TestTimedModelCountsAsItsModelStandsFor(t *testing.T) {
	builtin := llm.NewBuiltin()
	for _, c := range []struct {
		model   llm.Chatter
		latency time.Duration
		want    *llm.Counter
	}{
		{builtin, 0, builtin.PromptCounter()},
		{builtin, 200 * time.Millisecond, nil},
		{keeper{builtin}, 0, nil},
	} {
		r := llm.Router{Remote: newTimedModel(c.model, c.latency), Builtin: builtin}
		if got := r.UsageCounter(benchModel); got != c.want {
			t.Errorf("%T, latency %v: the engine counts with %v, want %v", c.model, c.latency, got, c.want)
		}
	}
}

// A tick world's engine has room for every worker's model call; with a
// model that waits (--latency), its background compactions are bounded as
// the daemon bounds an endpoint's, else by the engine's default.
func TestTickWorldConfig(t *testing.T) {
	for _, c := range []struct {
		latency time.Duration
		want    int
	}{{0, 0}, {200 * time.Millisecond, 32}} {
		o := TickOptions{Workers: 32, Latency: c.latency}
		var cfg tick.Config
		o.tickConfig(&cfg)
		if cfg.MaxConcurrentCalls != 32 || cfg.BackgroundCompactions != c.want {
			t.Errorf("latency %s: %d model calls and %d background compactions at once, want 32 and %d",
				c.latency, cfg.MaxConcurrentCalls, cfg.BackgroundCompactions, c.want)
		}
	}
}
