package tick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/npcd/npcd/character"
)

// MaxKeyBytes bounds an idempotency key.
const MaxKeyBytes = 128

// ValidKey reports whether key can be an idempotency key: 1 to MaxKeyBytes
// printable ASCII characters without spaces.
func ValidKey(key string) bool {
	if key == "" || len(key) > MaxKeyBytes {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] > '~' {
			return false
		}
	}
	return true
}

// TickWithKey is Tick with an idempotency key: the first call with key
// ticks and stores its answer under the key, in the transaction that
// commits the turn; every later call with the same key for the same NPC
// returns that answer and ticks nothing, even when the first is still
// running (it waits for it) or ran in another process. An empty key is Tick.
func (e *Engine) TickWithKey(ctx context.Context, id, key string) (*Result, error) {
	if key != "" && !ValidKey(key) {
		return nil, &InputError{Field: "Idempotency-Key", Message: fmt.Sprintf("must be 1-%d printable ASCII characters without spaces", MaxKeyBytes)}
	}
	start := e.deps.Clock.Now()
	var res *Result
	replayed := false
	err := e.withNPC(ctx, id, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, e.cfg.TickTimeout)
		defer cancel()
		if key != "" {
			prev, err := e.byKey(ctx, id, key)
			if err == nil {
				res, replayed = prev, true
				return nil
			}
			if !errors.Is(err, character.ErrNotFound) {
				return err
			}
		}
		var err error
		res, err = e.tick(ctx, id, key)
		if err != nil && key != "" {
			// Another process may have committed the same tick under the key
			// first (this commit then failed on the tick or the key): its
			// answer is the one to give.
			if prev, kerr := e.byKey(ctx, id, key); kerr == nil {
				res, err, replayed = prev, nil, true
			}
		}
		return err
	})
	if replayed {
		return res, nil
	}
	if e.deps.Observer != nil {
		e.deps.Observer.TickDone(id, e.deps.Clock.Since(start), res, err)
	}
	if err != nil {
		e.deps.Log.Debug().Err(err).Str("npc", id).Msg("tick failed")
		return nil, err
	}
	e.logTick(res, e.deps.Clock.Since(start))
	return res, nil
}

func (e *Engine) byKey(ctx context.Context, id, key string) (*Result, error) {
	o, err := e.deps.Characters.OutcomeByKey(ctx, id, key)
	if err != nil {
		return nil, err
	}
	return decodeOutcome(o)
}

// Outcome returns what NPC id's committed tick n answered, as the game got
// it. A tick that is not stored (idle, not yet run, or run before outcomes
// were kept) is a *NotFoundError.
func (e *Engine) Outcome(ctx context.Context, id string, n int64) (*Result, error) {
	if _, err := e.deps.Characters.Get(ctx, id); err != nil {
		return nil, err
	}
	o, err := e.deps.Characters.OutcomeByTick(ctx, id, n)
	if errors.Is(err, character.ErrNotFound) {
		return nil, &NotFoundError{Message: fmt.Sprintf("npc %q has no committed tick %d", id, n)}
	}
	if err != nil {
		return nil, err
	}
	return decodeOutcome(o)
}

// NotFoundError is something asked of an existing NPC that it does not
// have, such as a tick it never committed. It matches character.ErrNotFound.
type NotFoundError struct{ Message string }

func (e *NotFoundError) Error() string { return e.Message }

// Unwrap makes a NotFoundError match character.ErrNotFound.
func (e *NotFoundError) Unwrap() error { return character.ErrNotFound }

func decodeOutcome(o *character.TickOutcome) (*Result, error) {
	var r Result
	if err := json.Unmarshal([]byte(o.Body), &r); err != nil {
		return nil, fmt.Errorf("outcome %d of %q: %w", o.ID, o.CharacterID, err)
	}
	return &r, nil
}

// outcomeOf is the stored form of res.
func outcomeOf(res *Result, key string, at time.Time) (*character.TickOutcome, error) {
	// Encoded straight into the string stored: json.Marshal's bytes would
	// be copied into one. The text is Marshal's, with a line end after it.
	var b strings.Builder
	if err := json.NewEncoder(&b).Encode(res); err != nil {
		return nil, fmt.Errorf("outcome of tick %d of %q: %w", res.Tick, res.NPC, err)
	}
	body := strings.TrimSuffix(b.String(), "\n")
	o := &character.TickOutcome{CharacterID: res.NPC, Tick: res.Tick, Idle: res.Idle, At: at, Body: body}
	if key != "" {
		o.Key = &key
	}
	return o, nil
}

// idleKeyed stores an idle answer under its key, so a retry gets it again
// rather than a tick of events that arrived since.
func (e *Engine) idleKeyed(ctx context.Context, res *Result, key string) error {
	o, err := outcomeOf(res, key, e.deps.Clock.Now().UTC())
	if err != nil {
		return err
	}
	return e.deps.Characters.AddOutcome(ctx, o)
}

// Feed limits.
const (
	DefaultFeedLimit = 100
	MaxFeedLimit     = 1000
	// MaxFeedWait stays below the daemon's write timeout (the tick
	// timeout, at least 1s, plus 30s).
	MaxFeedWait = 30 * time.Second
	// feedPoll is how often a waiting feed looks for ticks committed by
	// another process, which do not wake it.
	feedPoll = time.Second
)

// FeedQuery asks the action feed for committed ticks after a cursor.
type FeedQuery struct {
	After int64         // the cursor of the last tick the reader has
	Limit int           // at most this many ticks; default DefaultFeedLimit
	NPCs  []string      // only these NPCs; none means every NPC
	Scope string        // only NPCs of this scope; empty means every scope
	Wait  time.Duration // with nothing new, wait up to this long for it
}

// Feed is a page of the action feed.
type Feed struct {
	Ticks []FeedTick `json:"ticks"`
	// Cursor is what the reader passes as after next time: the cursor of
	// the last tick here, or the one it sent when there is none.
	Cursor int64 `json:"cursor"`
}

// FeedTick is one committed, non-idle tick in the feed.
type FeedTick struct {
	Cursor   int64     `json:"cursor"`
	NPC      string    `json:"npc"`
	Tick     int64     `json:"tick"`
	At       time.Time `json:"at"`
	Actions  []Action  `json:"actions"`
	Awaiting []string  `json:"awaiting"`
	Text     string    `json:"text,omitempty"`
}

// Actions reads the action feed: the committed non-idle ticks of every NPC
// (or of fq.NPCs) after fq.After, in commit order. With none yet it waits
// up to fq.Wait for one. Since cursors grow in commit order, a reader that
// stores the cursor after handling a page and resumes from it sees every
// tick at least once, each NPC's in tick order.
func (e *Engine) Actions(ctx context.Context, fq FeedQuery) (*Feed, error) {
	if fq.Limit <= 0 {
		fq.Limit = DefaultFeedLimit
	}
	fq.Limit = min(fq.Limit, MaxFeedLimit)
	fq.Wait = min(fq.Wait, MaxFeedWait)
	deadline := e.deps.Clock.Now().Add(fq.Wait)
	for {
		wake := e.feed.wait() // taken before reading, so no commit slips between
		os, err := e.deps.Characters.Outcomes(ctx, character.FeedQuery{After: fq.After, Limit: fq.Limit, NPCs: fq.NPCs, Scope: fq.Scope})
		if err != nil {
			return nil, err
		}
		left := deadline.Sub(e.deps.Clock.Now())
		if len(os) > 0 || left <= 0 {
			return feedOf(os, fq.After)
		}
		t := e.deps.Clock.NewTimer(min(left, feedPoll))
		select {
		case <-wake:
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			return feedOf(nil, fq.After)
		case <-e.feed.stopped:
			t.Stop()
			return feedOf(nil, fq.After)
		}
		t.Stop()
	}
}

func feedOf(os []character.TickOutcome, after int64) (*Feed, error) {
	f := &Feed{Ticks: make([]FeedTick, 0, len(os)), Cursor: after}
	for i := range os {
		r, err := decodeOutcome(&os[i])
		if err != nil {
			return nil, err
		}
		f.Ticks = append(f.Ticks, FeedTick{Cursor: os[i].ID, NPC: r.NPC, Tick: r.Tick, At: os[i].At.UTC(),
			Actions: r.Actions, Awaiting: r.Awaiting, Text: r.Text})
		f.Cursor = os[i].ID
	}
	return f, nil
}

// StopFeed ends every wait of the action feed at once, now and later: a
// daemon shutting down calls it so long polls do not hold the shutdown.
// Feed reads still answer, without waiting.
func (e *Engine) StopFeed() { e.feed.stopOnce.Do(func() { close(e.feed.stopped) }) }

// FeedStopped is closed once StopFeed was called: a stream of the feed
// ends then.
func (e *Engine) FeedStopped() <-chan struct{} { return e.feed.stopped }

// feedSignal wakes feed readers when a tick commits.
type feedSignal struct {
	mu       sync.Mutex
	ch       chan struct{}
	stopped  chan struct{} // closed by StopFeed
	stopOnce sync.Once
}

func newFeedSignal() *feedSignal {
	return &feedSignal{ch: make(chan struct{}), stopped: make(chan struct{})}
}

// wait returns a channel closed at the next commit.
func (s *feedSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *feedSignal) notify() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}
