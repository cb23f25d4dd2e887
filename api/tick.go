package api

import (
	"fmt"
	"github.com/npcd/npcd/internal/text"
	"net/http"
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
	res, err := s.deps.Engine.Tick(r.Context(), id)
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
	seen := map[string]bool{}
	for i, id := range in.NPCs {
		switch {
		case !character.ValidID(id):
			return badRequest(fmt.Sprintf("npcs[%d]", i), "must be 1-64 characters of a-z 0-9 _ -")
		case seen[id]:
			return badRequest(fmt.Sprintf("npcs[%d]", i), "%q appears twice", id)
		}
		seen[id] = true
	}
	results, failures, err := s.deps.Engine.TickMany(r.Context(), in.NPCs)
	if err != nil {
		return err
	}
	out := BatchTickResponse{Results: results, Errors: make([]BatchError, len(failures))}
	if out.Results == nil {
		out.Results = []*TickResult{}
	}
	for i, f := range failures {
		// The engine's text is the internal chain; the client gets what a
		// single tick of that NPC would have answered.
		p := classify(f.Err, f.NPC)
		s.logProblem(r, f.NPC, p, f.Err)
		out.Errors[i] = BatchError{NPC: f.NPC, Code: p.code, Error: p.message}
	}
	writeJSON(w, http.StatusOK, out)
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
	results := make([]tick.ToolResult, len(in.Results))
	for i, tr := range in.Results {
		results[i] = tick.ToolResult{CallID: tr.CallID, Content: tr.Content}
	}
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
