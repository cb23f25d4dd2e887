package tick

import (
	"context"
	"fmt"
	"github.com/npcd/npcd/internal/text"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/lease"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// Limits on one request's worth of input.
const (
	MaxEventsPerRequest  = 256
	MaxResultsPerRequest = 64
	maxShortField        = 128
)

// EventInput is one perceived event as the game sends it.
type EventInput struct {
	ID    string `json:"id,omitempty"`
	Kind  string `json:"kind"`
	Actor string `json:"actor,omitempty"`
	// ActorID is the game's stable id of the actor, what its profile keys
	// on (see ValidActorID); ActorName the name the NPC sees. With only
	// Actor, it is both; with ActorID alone, the name is the id.
	ActorID   string    `json:"actor_id,omitempty"`
	ActorName string    `json:"actor_name,omitempty"`
	Target    string    `json:"target,omitempty"`
	Text      string    `json:"text,omitempty"`
	Room      string    `json:"room,omitempty"`
	At        time.Time `json:"at,omitzero"`
	// Self says the event is the NPC's own act as the game resolved it
	// (actor empty or the NPC itself). Without it an actor naming the NPC
	// is refused: the line would read as the NPC's own words.
	Self bool `json:"self,omitempty"`
}

// actorIDRe is what a game's actor id may hold.
var actorIDRe = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,128}$`)

// ValidActorID reports whether id is a valid actor_id: 1-128 characters of
// A-Z a-z 0-9 _ . : @ -.
func ValidActorID(id string) bool { return actorIDRe.MatchString(id) }

// actorOf settles an event's actor: its display name and its id, from the
// three fields a game may send.
func actorOf(f string, ev EventInput) (name, id string, err error) {
	name = ev.Actor
	if ev.ActorName != "" {
		if ev.Actor != "" && text.OneLine(ev.Actor) != text.OneLine(ev.ActorName) {
			return "", "", &InputError{Field: f + ".actor_name", Message: fmt.Sprintf("differs from actor (%q); send the display name in one of them", text.Clip(ev.Actor, 40))}
		}
		name = ev.ActorName
		if err := checkName(f, ".actor_name", text.OneLine(name)); err != nil {
			return "", "", err
		}
	}
	if ev.ActorID == "" {
		return text.OneLine(name), "", nil
	}
	if !ValidActorID(ev.ActorID) {
		return "", "", &InputError{Field: f + ".actor_id", Message: "must be 1-128 characters of A-Z a-z 0-9 _ . : @ -"}
	}
	if name == "" {
		name = ev.ActorID
	}
	return text.OneLine(name), ev.ActorID, nil
}

// MaxNameChars bounds an event's actor, target and room, in characters.
const MaxNameChars = 64

// checkName enforces the rule for names a game sends (kind, actor, target,
// room):
// at most MaxNameChars characters of letters, digits, spaces and ' ’ - _ . ,
// # &. Names are rendered unquoted into the NPC's perception ("Bob says:
// …"), so quotes, colons, brackets and line breaks would let a name write
// a line of its own, from any speaker. An error names the field field +
// suffix, joined only then.
func checkName(field, suffix, s string) error {
	if utf8.RuneCountInString(s) > MaxNameChars {
		return &InputError{Field: field + suffix, Message: fmt.Sprintf("is longer than %d characters", MaxNameChars)}
	}
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == ' ' || strings.ContainsRune("'’-_.,#&", r) {
			continue
		}
		return &InputError{Field: field + suffix, Message: fmt.Sprintf("may hold only letters, digits, spaces and ' - _ . , # & (not %q)", r)}
	}
	return nil
}

// isSelf reports whether name names the NPC c (its name or its id).
func isSelf(name string, c *character.Character) bool {
	k := character.EntityKey(name)
	return k != "" && (k == character.EntityKey(c.Name) || k == character.EntityKey(c.ID))
}

// PostEvents stores events for NPC id. Each is durable when this returns
// (it survives a crash) and is consumed by exactly one later tick; an event
// whose id was seen before is counted as a duplicate and ignored. Bad input
// is an *InputError naming the field and stores nothing; an event dated more
// than Config.MaxEventLead ahead of the game's clock (see checkEventTimes)
// is a *character.UnfitError and stores nothing; a full inbox is
// character.ErrInboxFull and stores nothing.
func (e *Engine) PostEvents(ctx context.Context, id string, in []EventInput) (accepted, duplicates int, err error) {
	if len(in) == 0 {
		return 0, 0, &InputError{Field: "events", Message: "must hold at least one event"}
	}
	if len(in) > MaxEventsPerRequest {
		return 0, 0, &InputError{Field: "events", Message: fmt.Sprintf("at most %d events per request", MaxEventsPerRequest)}
	}
	evs := make([]character.Event, len(in))
	for i, ev := range in {
		f := fmt.Sprintf("events[%d]", i)
		kind := strings.TrimSpace(ev.Kind)
		switch {
		case kind == "":
			return 0, 0, &InputError{Field: f + ".kind", Message: "is required"}
		case len(kind) > 32:
			return 0, 0, &InputError{Field: f + ".kind", Message: "is longer than 32 bytes"}
		case len(ev.ID) > maxShortField:
			return 0, 0, &InputError{Field: f + ".id", Message: fmt.Sprintf("is longer than %d bytes", maxShortField)}
		case len(ev.Actor) > maxShortField:
			return 0, 0, &InputError{Field: f + ".actor", Message: fmt.Sprintf("is longer than %d bytes", maxShortField)}
		case len(ev.ActorName) > maxShortField:
			return 0, 0, &InputError{Field: f + ".actor_name", Message: fmt.Sprintf("is longer than %d bytes", maxShortField)}
		case len(ev.Target) > maxShortField:
			return 0, 0, &InputError{Field: f + ".target", Message: fmt.Sprintf("is longer than %d bytes", maxShortField)}
		case len(ev.Room) > maxShortField:
			return 0, 0, &InputError{Field: f + ".room", Message: fmt.Sprintf("is longer than %d bytes", maxShortField)}
		case len(ev.Text) > e.cfg.MaxEventTextBytes:
			return 0, 0, &InputError{Field: f + ".text", Message: fmt.Sprintf("is longer than %d bytes", e.cfg.MaxEventTextBytes)}
		case strings.TrimSpace(ev.Text) == "" && strings.TrimSpace(ev.Actor+ev.ActorName+ev.ActorID) == "" && !ev.Self:
			return 0, 0, &InputError{Field: f + ".text", Message: "an event needs a text or an actor"}
		}
		for _, n := range []struct{ field, value string }{{".kind", kind}, {".actor", ev.Actor}, {".target", ev.Target}, {".room", ev.Room}} {
			if err := checkName(f, n.field, text.OneLine(n.value)); err != nil {
				return 0, 0, err
			}
		}
		name, actorID, err := actorOf(f, ev)
		if err != nil {
			return 0, 0, err
		}
		evs[i] = character.Event{Kind: kind, Actor: name, ActorID: actorID, Target: text.OneLine(ev.Target), Text: ev.Text, Room: text.OneLine(ev.Room), At: ev.At}
		if ev.ID != "" {
			ref := ev.ID
			evs[i].Ref = &ref
		}
		if evs[i].At.IsZero() {
			evs[i].At = e.deps.Clock.Now().UTC()
		}
	}
	if err := e.beginCommitting(); err != nil {
		return 0, 0, err
	}
	defer e.endCommitting()
	c, err := e.deps.Characters.Intake(ctx, id) // who the events may not name; auto-tick
	if err != nil {
		return 0, 0, err
	}
	if e.afterIntake != nil {
		e.afterIntake()
	}
	if err := e.checkEventTimes(ctx, in); err != nil {
		return 0, 0, err
	}
	for i, ev := range in {
		// The field an error names, made only for an error.
		field := func() string {
			f := fmt.Sprintf("events[%d].actor", i)
			switch {
			case ev.ActorName != "":
				f += "_name"
			case ev.Actor == "" && ev.ActorID != "":
				f += "_id" // the id is the name
			}
			return f
		}
		switch {
		case ev.Self && evs[i].Actor != "" && !isSelf(evs[i].Actor, c):
			return 0, 0, &ValueError{Field: field(), Message: fmt.Sprintf("names %q, but the event says it is the NPC's own act (self); leave actor empty or name the NPC", evs[i].Actor)}
		case ev.Self:
			evs[i].Actor, evs[i].ActorID = c.Name, ""
		case isSelf(evs[i].Actor, c):
			return 0, 0, &ValueError{Field: field(), Message: fmt.Sprintf("is the NPC itself (%q); send \"self\": true when the event is the NPC's own act as the game resolved it", evs[i].Actor)}
		}
	}
	// Committed with the ticks and posts of other NPCs queued meanwhile
	// (see committer); the function may run again, so it sets its counts
	// anew.
	err = e.commits.commit(ctx, func(ctx context.Context, tx *gorm.DB, _ *lateRows) error {
		var err error
		accepted, duplicates, err = e.deps.Characters.WithTx(tx).AddEvents(ctx, id, evs, e.cfg.MaxPendingEvents)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	if accepted > 0 {
		e.eventsPosted.Store(id, struct{}{})
		e.autoNote(c)
	}
	return accepted, duplicates, nil
}

// checkEventTimes refuses events dated more than MaxEventLead ahead of the
// game's clock: the latest game time any NPC perceived, or npcd's own clock
// when later. An NPC's clock never goes back, so one wrong date would pin
// it. The game's calendar is its own (a game may be set in 1250 or 2300):
// before any NPC has perceived anything, any date is accepted and sets it.
// The world's clock rather than the NPC's lets an NPC that was left alone
// for months of game time perceive again.
func (e *Engine) checkEventTimes(ctx context.Context, in []EventInput) error {
	latest := time.Time{}
	for _, ev := range in {
		if ev.At.After(latest) {
			latest = ev.At
		}
	}
	now := e.deps.Clock.Now().UTC()
	if latest.IsZero() || latest.Sub(now) <= e.cfg.MaxEventLead {
		// The game's clock is never behind npcd's in this check: times
		// within the lead of npcd's clock need no query.
		return nil
	}
	// The clock as this daemon knows it first; read again from the NPCs
	// before an event is refused, or taken as unset, since other daemons
	// tick NPCs too.
	for _, fresh := range []bool{false, true} {
		clock, err := e.deps.Characters.WorldClock(ctx, fresh, now)
		if err != nil {
			return err
		}
		if clock.IsZero() || clock.Year() <= 1 {
			if fresh {
				return nil
			}
			continue
		}
		if now.After(clock) {
			clock = now
		}
		i := slices.IndexFunc(in, func(ev EventInput) bool { return !ev.At.IsZero() && ev.At.Sub(clock) > e.cfg.MaxEventLead })
		if i < 0 {
			return nil
		}
		if fresh {
			return &character.UnfitError{Field: fmt.Sprintf("events[%d].at", i), Message: fmt.Sprintf(
				"%s is more than %s ahead of the game's clock (%s: the latest game time any NPC perceived, or npcd's clock when later); "+
					"an NPC's clock never goes back, so a wrong date would pin it there",
				in[i].At.UTC().Format(time.RFC3339), leadText(e.cfg.MaxEventLead), clock.Format(time.RFC3339))}
		}
	}
	return nil
}

// leadText says a lead in days when it is whole days.
func leadText(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// ToolResult is the game's answer to a returns:true call.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Content string `json:"content"`
}

// PostToolResults stores the game's results for calls NPC id is waiting on.
// When the last awaited result arrives, the next tick continues the turn.
// A call id the NPC is not waiting on is ErrConflict; nothing is stored
// unless every result is accepted.
func (e *Engine) PostToolResults(ctx context.Context, id string, results []ToolResult) error {
	if len(results) == 0 {
		return &InputError{Field: "results", Message: "must hold at least one result"}
	}
	if len(results) > MaxResultsPerRequest {
		return &InputError{Field: "results", Message: fmt.Sprintf("at most %d results per request", MaxResultsPerRequest)}
	}
	seen := map[string]bool{}
	for i, r := range results {
		f := fmt.Sprintf("results[%d]", i)
		switch {
		case r.CallID == "":
			return &InputError{Field: f + ".call_id", Message: "is required"}
		case seen[r.CallID]:
			return &InputError{Field: f + ".call_id", Message: fmt.Sprintf("%q appears twice", r.CallID)}
		case len(r.Content) > e.cfg.MaxToolResultBytes:
			return &InputError{Field: f + ".content", Message: fmt.Sprintf("is longer than %d bytes", e.cfg.MaxToolResultBytes)}
		}
		seen[r.CallID] = true
	}
	var c *character.Character
	var posted []*character.Message // as stored, once committed
	err := e.withNPC(ctx, id, func(ctx context.Context) error {
		// Runs under the NPC's lock: the history the engine holds is
		// written through below, as a tick's commit writes its own.
		var err error
		if c, err = e.deps.Characters.Get(ctx, id); err != nil {
			return err
		}
		waiting := map[string]string{}
		for _, pc := range c.State.Awaiting.V {
			waiting[pc.ID] = pc.Tool
		}
		var msgs []*character.Message
		for i, r := range results {
			tool, ok := waiting[r.CallID]
			if !ok {
				return &ConflictError{Field: fmt.Sprintf("results[%d].call_id", i), Message: fmt.Sprintf("npc %q is not waiting for a result of call %q", id, r.CallID)}
			}
			msgs = append(msgs, &character.Message{Role: llm.RoleTool, ToolCallID: r.CallID, ToolName: tool, Content: r.Content,
				Turn: c.State.Turn, Tick: c.State.Tick, GameTime: c.State.GameTime})
		}
		var rest []character.PendingCall
		for _, pc := range c.State.Awaiting.V {
			if !seen[pc.ID] {
				rest = append(rest, pc)
			}
		}
		if rest == nil {
			rest = []character.PendingCall{}
		}
		var st character.State
		held := false
		err = e.deps.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			cs := e.deps.Characters.WithTx(tx)
			d, err := cs.InsertMessages(ctx, id, msgs, e.Counter(c.Model), c.Masking.OffloadBytes)
			if err != nil {
				return err
			}
			// One statement writes the state, adds the results to the
			// running totals and tells whether the history c was read at
			// is still the stored one.
			st, held, err = cs.AdvanceState(ctx, id, map[string]any{"awaiting": store.NewJSON(rest), "resume": len(rest) == 0}, d, c.State.HistoryRev)
			return err
		})
		if err != nil {
			return err
		}
		posted = msgs
		live, known := e.history.get(id, c.State.HistoryRev)
		e.appended(c, st.HistoryRev, held, live, known, posted, nil)
		return nil
	})
	if err == nil {
		e.notePosted(id, posted)
	}
	if err == nil && len(c.State.Awaiting.V) == len(results) {
		e.autoNote(c) // the last awaited result: the turn can go on
	}
	return err
}

// BatchError is one NPC's failure in a batch tick. Err is the internal
// cause: callers show game servers a safe message derived from it, never
// its text.
type BatchError struct {
	NPC string
	Err error
}

// MaxBatchWorkers bounds how many NPCs a batch tick runs at once (model
// calls are further bounded by Config.MaxConcurrentCalls).
const MaxBatchWorkers = 32

// TickMany ticks the given NPCs in parallel; with none given, every NPC with
// pending events or posted tool results. Results and errors keep the order of
// ids; one NPC's failure does not stop the others.
func (e *Engine) TickMany(ctx context.Context, ids []string) ([]*Result, []BatchError, error) {
	return e.TickManyWithKeys(ctx, ids, nil)
}

// TickManyWithKeys is TickMany where keys maps NPC ids to the idempotency
// key of their tick (see TickWithKey); NPCs it does not name tick without.
func (e *Engine) TickManyWithKeys(ctx context.Context, ids []string, keys map[string]string) ([]*Result, []BatchError, error) {
	if len(ids) == 0 {
		var err error
		if ids, err = e.deps.Characters.NPCsWithPending(ctx); err != nil {
			return nil, nil, err
		}
		// NPCs another daemon holds are that daemon's to tick: they are
		// reported busy at once rather than waited for.
		ctx = lease.NoWait(ctx)
	}
	results := make([]*Result, len(ids))
	errs := make([]error, len(ids))
	e.TickEach(ctx, ids, keys, func(i int, r *Result, err error) { results[i], errs[i] = r, err })
	var out []*Result
	var bad []BatchError
	for i, r := range results {
		if errs[i] != nil {
			bad = append(bad, BatchError{NPC: ids[i], Err: errs[i]})
			continue
		}
		out = append(out, r)
	}
	return out, bad, nil
}
