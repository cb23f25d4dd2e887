package api

import (
	"fmt"
	"github.com/npcd/npcd/internal/text"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/npcd/npcd/character"
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
	evs := make([]tick.EventInput, len(in.Events))
	for i, ev := range in.Events {
		evs[i] = tick.EventInput{ID: ev.ID, Kind: ev.Kind, Actor: ev.Actor, Target: ev.Target, Text: ev.Text, Room: ev.Room, Self: ev.Self}
		if ev.At == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, ev.At)
		if err != nil {
			return badRequest(fmt.Sprintf("events[%d].at", i), "must be an RFC 3339 time such as 2026-11-21T10:00:00Z, got %q", text.Clip(ev.At, 40))
		}
		evs[i].At = at
	}
	accepted, duplicates, err := s.deps.Engine.PostEvents(r.Context(), id, evs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, EventsAccepted{Accepted: accepted, Duplicates: duplicates})
	return nil
}

func (s *Server) tick(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	// The tick takes no parameters; an empty object is tolerated so that
	// clients which always send a body are not refused.
	var in struct{}
	if err := s.readJSON(w, r, &in, false); err != nil {
		return err
	}
	res, err := s.deps.Engine.TickWithKey(r.Context(), id, r.Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) tickMany(w http.ResponseWriter, r *http.Request) error {
	var in BatchTickRequest
	if err := s.readJSON(w, r, &in, false); err != nil {
		return err
	}
	if len(in.NPCs) > MaxBatchNPCs {
		return badRequest("npcs", "at most %d npcs per batch", MaxBatchNPCs)
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
	out := BatchTickResponse{Results: []*TickResult{}, Errors: []BatchError{}}
	if len(ids) > 0 || len(invalid) == 0 {
		results, failures, err := s.deps.Engine.TickManyWithKeys(r.Context(), ids, in.Keys)
		if err != nil {
			return err
		}
		if results != nil {
			out.Results = results
		}
		failed := map[string]BatchError{}
		for _, f := range failures {
			// The engine's text is the internal chain; the client gets what a
			// single tick of that NPC would have answered.
			p := classify(f.Err, f.NPC)
			s.logProblem(r, f.NPC, p, f.Err)
			failed[f.NPC] = BatchError{NPC: f.NPC, Code: p.code, Error: p.message}
		}
		if len(in.NPCs) == 0 { // every pending NPC: the engine's order
			for _, f := range failures {
				out.Errors = append(out.Errors, failed[f.NPC])
			}
		}
		for i, id := range in.NPCs {
			if be, ok := invalid[i]; ok {
				out.Errors = append(out.Errors, be)
			} else if be, ok := failed[id]; ok {
				out.Errors = append(out.Errors, be)
			}
		}
	} else {
		for i := range in.NPCs {
			out.Errors = append(out.Errors, invalid[i])
		}
	}
	writeJSON(w, http.StatusOK, out)
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
	q, err := parseQuery(r, "after", "limit", "wait", "npc")
	if err != nil {
		return err
	}
	var fq tick.FeedQuery
	if a := q.str("after", ""); a != "" {
		if fq.After, err = strconv.ParseInt(a, 10, 64); err != nil || fq.After < 0 {
			return badRequest("after", "must be a cursor: an integer of at least 0")
		}
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
	if v := q.str("npc", ""); v != "" {
		fq.NPCs = strings.Split(v, ",")
		if len(fq.NPCs) > MaxBatchNPCs {
			return badRequest("npc", "names at most %d npcs", MaxBatchNPCs)
		}
		for _, id := range fq.NPCs {
			if !character.ValidID(id) {
				return badRequest("npc", "must be npc ids separated by commas, each 1-64 characters of a-z 0-9 _ -")
			}
		}
	}
	feed, err := s.deps.Engine.Actions(r.Context(), fq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, feed)
	return nil
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
