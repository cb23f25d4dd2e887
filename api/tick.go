package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/text"
	"github.com/npcd/npcd/lease"
	"github.com/npcd/npcd/tick"
)

// MaxBatchNPCs bounds the NPCs one batch tick names.
const MaxBatchNPCs = 1000

// eventIn is an Event as decoded: its time arrives as text so that a bad
// one is reported with the event's index. The shallower At shadows Event's.
type eventIn struct {
	Event
	At string `json:"at"`
}

// eventInputs converts decoded events, their times parsed; a bad time is a
// *requestError naming the event (events[i].at).
func eventInputs(in []eventIn) ([]tick.EventInput, error) {
	evs := make([]tick.EventInput, len(in))
	for i, ev := range in {
		evs[i] = tick.EventInput{ID: ev.ID, Kind: ev.Kind, Actor: ev.Actor, ActorID: ev.ActorID, ActorName: ev.ActorName, Target: ev.Target, Text: ev.Text, Room: ev.Room, Self: ev.Self}
		if ev.At == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, ev.At)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("events[%d].at", i), "must be an RFC 3339 time such as 2026-11-21T10:00:00Z, got %q", text.Clip(ev.At, 40))
		}
		evs[i].At = at
	}
	return evs, nil
}

func (s *Server) postEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	var in struct {
		Events []eventIn `json:"events"`
	}
	if err := s.readJSON(w, r, &in, true); err != nil {
		return err
	}
	got, err := s.post(r.Context(), id, in.Events)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, got)
	return nil
}

// post stores events for NPC id, as POST /v1/npcs/{npc}/events does.
func (s *Server) post(ctx context.Context, id string, events []eventIn) (EventsAccepted, error) {
	evs, err := eventInputs(events)
	if err != nil {
		return EventsAccepted{}, err
	}
	accepted, duplicates, err := s.deps.Engine.PostEvents(ctx, id, evs)
	return EventsAccepted{Accepted: accepted, Duplicates: duplicates}, err
}

func (s *Server) tick(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	// The body is optional: an empty object is tolerated so that clients
	// which always send one are not refused; events, when sent, are posted
	// first, as POST /v1/npcs/{npc}/events would.
	var in struct {
		Events []eventIn `json:"events"`
	}
	if err := s.readJSON(w, r, &in, false); err != nil {
		return err
	}
	key := r.Header.Get("Idempotency-Key")
	if in.Events != nil {
		// A key the tick would refuse is refused before the events are
		// stored: a refused request changes nothing.
		if key != "" && !tick.ValidKey(key) {
			return badRequest("Idempotency-Key", "must be 1-%d printable ASCII characters without spaces", tick.MaxKeyBytes)
		}
		got, err := s.post(r.Context(), id, in.Events)
		if err != nil {
			return err
		}
		w.Header().Set(HeaderEventsAccepted, strconv.Itoa(got.Accepted))
		w.Header().Set(HeaderEventsDuplicates, strconv.Itoa(got.Duplicates))
	}
	res, err := s.deps.Engine.TickWithKey(r.Context(), id, key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// HeaderEventsAccepted and HeaderEventsDuplicates answer a tick whose
// request carried events: how many were stored, and how many ignored as
// seen before (EventsAccepted).
const (
	HeaderEventsAccepted   = "Npcd-Events-Accepted"
	HeaderEventsDuplicates = "Npcd-Events-Duplicates"
)

// batchTickIn is a BatchTickRequest as decoded: its events' times arrive
// as text (eventIn). The shallower Events shadows the request's.
type batchTickIn struct {
	BatchTickRequest
	Events map[string][]eventIn `json:"events"`
}

func (s *Server) tickMany(w http.ResponseWriter, r *http.Request) error {
	var body batchTickIn
	if err := s.readJSON(w, r, &body, false); err != nil {
		return err
	}
	in := body.BatchTickRequest
	if len(in.NPCs) > MaxBatchNPCs {
		return badRequest("npcs", "at most %d npcs per batch", MaxBatchNPCs)
	}
	if in.Scope != "" {
		switch {
		case !character.ValidID(in.Scope):
			return badRequest("scope", "must be 1-64 characters of a-z 0-9 _ -")
		case len(in.NPCs) > 0:
			return badRequest("scope", "limits an empty npcs list to one scope; leave it out when naming npcs")
		}
	}
	// A malformed id fails alone, as an unknown one does: one bad name in a
	// game's list must not silence every other NPC.
	var ids []string
	invalid := map[int]BatchError{}
	seen := map[string]bool{}
	for i, id := range in.NPCs {
		switch {
		case !character.ValidID(id):
			invalid[i] = BatchError{NPC: text.Clip(id, 80), Code: CodeBadRequest, Error: fmt.Sprintf("npcs[%d]: must be 1-64 characters of a-z 0-9 _ -", i)}
			continue
		case seen[id]:
			return badRequest(fmt.Sprintf("npcs[%d]", i), "%q appears twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	for npc, key := range in.Keys {
		switch {
		case !seen[npc]:
			return badRequest("keys."+text.Clip(npc, 64), "names no npc of npcs")
		case !tick.ValidKey(key):
			return badRequest("keys."+npc, "must be 1-%d printable ASCII characters without spaces", tick.MaxKeyBytes)
		}
	}
	for npc := range body.Events {
		switch {
		case len(in.NPCs) == 0:
			return badRequest("events", "needs the npcs they are for listed in npcs")
		case !seen[npc]:
			return badRequest("events."+text.Clip(npc, 64), "names no npc of npcs")
		}
	}
	ctx := r.Context()
	if len(in.NPCs) == 0 { // every pending NPC (of the scope)
		var err error
		if ids, err = s.deps.Engine.PendingNPCs(ctx, in.Scope); err != nil {
			return err
		}
		// NPCs another daemon holds are that daemon's to tick: they are
		// reported busy at once rather than waited for.
		ctx = lease.NoWait(ctx)
	}
	// The engine's text is the internal chain; the client gets what a
	// single tick of that NPC would have answered.
	failure := func(npc string, err error) BatchError {
		p := classify(err, npc)
		s.logProblem(r, npc, p, err)
		return BatchError{NPC: npc, Code: p.code, Error: p.message}
	}
	posted := s.postBatchEvents(ctx, ids, body.Events, failure)
	if wantsNDJSON(r) {
		return s.streamBatch(ctx, w, in, ids, invalid, posted, failure)
	}
	results := make([]*TickResult, len(ids))
	failed := map[string]BatchError{}
	var order []string // failures as they came, for the pending NPCs
	s.deps.Engine.TickEach(ctx, ids, in.Keys, func(i int, res *tick.Result, err error) {
		if err != nil {
			failed[ids[i]] = failure(ids[i], err)
			order = append(order, ids[i])
			return
		}
		results[i] = res
	})
	out := BatchTickResponse{Results: []*TickResult{}, Errors: []BatchError{}}
	if len(posted) > 0 {
		out.Events = make(map[string]BatchEvents, len(posted))
		for _, p := range posted {
			out.Events[p.NPC] = p.BatchEvents
		}
	}
	for _, res := range results {
		if res != nil {
			out.Results = append(out.Results, res)
		}
	}
	if len(in.NPCs) == 0 {
		for _, id := range ids {
			if be, ok := failed[id]; ok {
				out.Errors = append(out.Errors, be)
			}
		}
	}
	for i, id := range in.NPCs {
		if be, ok := invalid[i]; ok {
			out.Errors = append(out.Errors, be)
		} else if be, ok := failed[id]; ok {
			out.Errors = append(out.Errors, be)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// postBatchEvents posts the events a batch tick carries for NPCs of ids,
// as POST /v1/npcs/{npc}/events would, before any of them ticks: the
// posts run in parallel (at most tick.MaxBatchWorkers at once), so that
// their commits are grouped as the ticks' are. It returns what became of
// each NPC's events, in the order of ids. An NPC whose events were refused
// (a malformed event, an unknown NPC, a full inbox) still ticks, as it would
// after a refused post: its pending events are consumed, and the refusal is
// told beside its tick (NPCEvents.Code and Error).
func (s *Server) postBatchEvents(ctx context.Context, ids []string, events map[string][]eventIn, failure func(string, error) BatchError) []NPCEvents {
	var out []NPCEvents
	for _, id := range ids {
		if _, ok := events[id]; ok {
			out = append(out, NPCEvents{NPC: id})
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(tick.MaxBatchWorkers, len(out)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				p := &out[i]
				got, err := s.post(ctx, p.NPC, events[p.NPC])
				p.Accepted, p.Duplicates = got.Accepted, got.Duplicates
				if err != nil {
					be := failure(p.NPC, err)
					p.Code, p.Error = be.Code, be.Error
				}
			}
		}()
	}
	for i := range out {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

// wantsNDJSON reports whether the request asks for an NDJSON stream.
func wantsNDJSON(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "application/x-ndjson") {
				return true
			}
		}
	}
	return false
}

// streamBatch answers a batch tick as NDJSON: the malformed ids first,
// then what became of the events posted for each NPC (posted), then one
// line per NPC as its tick ends.
func (s *Server) streamBatch(ctx context.Context, w http.ResponseWriter, in BatchTickRequest, ids []string, invalid map[int]BatchError,
	posted []NPCEvents, failure func(string, error) BatchError) error {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	line := func(l BatchLine) {
		// A client gone away stops reading; the ticks still commit and the
		// feed has them.
		if enc.Encode(l) == nil {
			_ = rc.Flush()
		}
	}
	for i := range in.NPCs {
		if be, ok := invalid[i]; ok {
			line(BatchLine{Error: &be})
		}
	}
	for i := range posted {
		line(BatchLine{Events: &posted[i]})
	}
	if len(ids) == 0 {
		_ = rc.Flush()
	}
	s.deps.Engine.TickEach(ctx, ids, in.Keys, func(i int, res *tick.Result, err error) {
		if err != nil {
			be := failure(ids[i], err)
			line(BatchLine{Error: &be})
			return
		}
		line(BatchLine{Result: res})
	})
	return nil
}

// outcome answers GET /v1/npcs/{npc}/ticks/{tick}: a committed tick's
// answer, again.
func (s *Server) outcome(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(r.PathValue("tick"), 10, 64)
	if err != nil || n < 1 {
		return badRequest("{tick}", "must be a positive integer")
	}
	if _, err := parseQuery(r); err != nil {
		return err
	}
	res, err := s.deps.Engine.Outcome(r.Context(), id, n)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// actions answers GET /v1/actions, the action feed.
func (s *Server) actions(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "after", "limit", "wait", "npc", "scope")
	if err != nil {
		return err
	}
	fq, err := feedQuery(q, q.str("after", ""))
	if err != nil {
		return err
	}
	limit, err := q.positive("limit", tick.DefaultFeedLimit, tick.MaxFeedLimit)
	if err != nil {
		return err
	}
	fq.Limit = int(limit)
	if v := q.str("wait", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > tick.MaxFeedWait {
			return badRequest("wait", "must be a duration such as 500ms or 20s, at most %s", tick.MaxFeedWait)
		}
		fq.Wait = d
	}
	feed, err := s.deps.Engine.Actions(r.Context(), fq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, feed)
	return nil
}

// feedQuery reads the parameters the feed and its stream share: the
// cursor (after), npc and scope.
func feedQuery(q query, after string) (tick.FeedQuery, error) {
	var fq tick.FeedQuery
	var err error
	if after != "" {
		if fq.After, err = strconv.ParseInt(after, 10, 64); err != nil || fq.After < 0 {
			return fq, badRequest("after", "must be a cursor: an integer of at least 0")
		}
	}
	if v := q.str("npc", ""); v != "" {
		fq.NPCs = strings.Split(v, ",")
		if len(fq.NPCs) > MaxBatchNPCs {
			return fq, badRequest("npc", "names at most %d npcs", MaxBatchNPCs)
		}
		for _, id := range fq.NPCs {
			if !character.ValidID(id) {
				return fq, badRequest("npc", "must be npc ids separated by commas, each 1-64 characters of a-z 0-9 _ -")
			}
		}
	}
	if fq.Scope = q.str("scope", ""); fq.Scope != "" && !character.ValidID(fq.Scope) {
		return fq, badRequest("scope", "must be 1-64 characters of a-z 0-9 _ -")
	}
	return fq, nil
}

func (s *Server) postToolResults(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	var in ToolResultsRequest
	if err := s.readJSON(w, r, &in, true); err != nil {
		return err
	}
	results := in.Results
	if err := s.deps.Engine.PostToolResults(r.Context(), id, results); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, ToolResultsAccepted{Accepted: len(results)})
	return nil
}

func (s *Server) compact(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	var in CompactRequest
	if err := s.readJSON(w, r, &in, false); err != nil {
		return err
	}
	// Checked here so an unknown NPC is a 404 even where the engine has
	// no compactor to ask.
	if _, err := s.deps.NPCs.Get(r.Context(), id); err != nil {
		return err
	}
	rec, err := s.deps.Engine.Compact(r.Context(), id, in.Instruction)
	if err != nil {
		return err
	}
	if rec != nil {
		s.deps.Metrics.CompactionDone(rec.Trigger)
	}
	writeJSON(w, http.StatusOK, CompactResponse{Compaction: tick.CompactionOf(rec)})
	return nil
}

func (s *Server) sleep(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	var in SleepRequest
	if err := s.readJSON(w, r, &in, false); err != nil {
		return err
	}
	start := time.Now()
	rep, err := s.deps.Engine.Sleep(r.Context(), id)
	s.deps.Metrics.SleepDone(time.Since(start), rep, err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

func (s *Server) clearContext(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	if _, err := parseQuery(r); err != nil {
		return err
	}
	if err := s.deps.Engine.ClearContext(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
