package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/inspect"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/tick"
)

// Bounds of the inspection routes' parameters.
const (
	// DefaultMemoryK is how many results GET /memory returns by default.
	DefaultMemoryK = 5
	// MaxQueryBytes bounds the q of GET /memory.
	MaxQueryBytes = 1000
	// DefaultTimelineLimit and MaxTimelineLimit bound the ticks of one
	// timeline.
	DefaultTimelineLimit = 10000
	MaxTimelineLimit     = 100000
)

// pathID returns the route's {id} as a positive integer.
func pathID(r *http.Request) (int64, error) {
	n, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || n < 1 {
		return 0, badRequest("id", "must be a positive integer")
	}
	return n, nil
}

// inspected validates a route's {npc} and that it takes no query
// parameters, for the routes that take none.
func inspected(r *http.Request) (string, error) {
	id, err := npcID(r)
	if err != nil {
		return "", err
	}
	if _, err := parseQuery(r); err != nil {
		return "", err
	}
	return id, nil
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) error {
	id, err := inspected(r)
	if err != nil {
		return err
	}
	c, err := s.deps.NPCs.Get(r.Context(), id)
	if err != nil {
		return err
	}
	o, err := s.deps.Inspector.Overview(r.Context(), id)
	if err != nil {
		return err
	}
	warnings := tick.Warnings(c)
	if warnings == nil {
		warnings = []string{}
	}
	out := Overview{
		NPC: c.ID, Name: c.Name, Model: c.Model, Tick: c.State.Tick, Turn: c.State.Turn, GameTime: c.State.GameTime,
		LastTickAt: o.LastTickAt, Context: tick.ContextOf(c), Warnings: warnings,
		Compaction: CompactionSettings{SleepThreshold: c.Compaction.SleepThreshold, EmergencyThreshold: c.Compaction.EmergencyThreshold,
			PreserveRecentMessages: c.Compaction.PreserveRecentMessages, PreserveRatio: c.Compaction.PreserveRatio,
			Target: c.Compaction.Target},
		CompactionsByTrigger: o.CompactionsByTrigger, LastCompaction: o.LastCompaction,
		Sleep: SleepStatus{Cron: c.Sleep.Cron, Timezone: c.Sleep.Timezone, LastSleepAt: c.State.LastSleepAt},
		Knowledge: Knowledge{JournalByType: o.JournalByType, Unconsolidated: o.Unconsolidated, Memories: o.Memories,
			SupersededMemories: o.SupersededMemories, Profiles: o.Profiles, Facts: o.Facts, SupersededFacts: o.SupersededFacts},
		PendingEvents: o.PendingEvents, Awaiting: []string{},
	}
	if o.Summary != nil {
		m := messageOf(o.Summary)
		out.Summary = &m
	}
	if s.deps.Sleeps != nil {
		out.Sleep.Known = true
		if at, ok := s.deps.Sleeps.NextRun(id); ok {
			out.Sleep.NextRun = &at
		}
	}
	for _, pc := range c.State.Awaiting.V {
		out.Awaiting = append(out.Awaiting, pc.ID)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) memory(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	q, err := parseQuery(r, "q", "k")
	if err != nil {
		return err
	}
	query := strings.TrimSpace(q.str("q", ""))
	switch {
	case query == "":
		return badRequest("q", "is required: what to search the NPC's memory for")
	case len(query) > MaxQueryBytes:
		return badRequest("q", "is longer than %d bytes", MaxQueryBytes)
	}
	k, err := q.positive("k", DefaultMemoryK, journal.MaxK)
	if err != nil {
		return err
	}
	if _, err := s.deps.NPCs.Get(r.Context(), id); err != nil {
		return err
	}
	rs, err := s.deps.Retriever.Search(r.Context(), id, query, int(k))
	if err != nil {
		return err
	}
	out := MemoryResponse{Results: make([]MemoryResult, len(rs))}
	for i, res := range rs {
		parts := res.Parts
		if parts == nil {
			parts = map[string]float64{}
		}
		out.Results[i] = MemoryResult{ID: res.ID, Kind: res.Kind, Ref: refOf(res.Kind, res.ID), Content: res.Content,
			Score: res.Score, ScoreParts: parts, Sources: sourcesOf(res.Sources), GameTime: res.GameTime, Importance: res.Importance}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// refOf names an item in the syntax of `npcd aihistory show`.
func refOf(kind string, id int64) string {
	switch kind {
	case journal.KindMemory:
		return fmt.Sprintf("mem:%d", id)
	case journal.KindJournal:
		return fmt.Sprintf("j:%d", id)
	case journal.KindMessage:
		return fmt.Sprintf("m:%d", id)
	}
	return fmt.Sprintf("%s:%d", kind, id)
}

func sourcesOf(src character.Sources) MemorySources {
	out := MemorySources{JournalIDs: src.JournalIDs, MessageIDs: src.MessageIDs, EventRefs: src.EventRefs}
	if out.JournalIDs == nil {
		out.JournalIDs = []int64{}
	}
	if out.MessageIDs == nil {
		out.MessageIDs = []int64{}
	}
	if out.EventRefs == nil {
		out.EventRefs = []string{}
	}
	return out
}

func (s *Server) message(w http.ResponseWriter, r *http.Request) error {
	id, err := inspected(r)
	if err != nil {
		return err
	}
	msgID, err := pathID(r)
	if err != nil {
		return err
	}
	m, rec, err := s.deps.Inspector.Message(r.Context(), id, msgID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, MessageDetail{Message: messageOf(m), ArchivedBy: rec})
	return nil
}

func (s *Server) entry(w http.ResponseWriter, r *http.Request) error {
	id, err := inspected(r)
	if err != nil {
		return err
	}
	entryID, err := pathID(r)
	if err != nil {
		return err
	}
	e, err := s.deps.Inspector.Entry(r.Context(), id, entryID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, EntryDetail{Entry: *e})
	return nil
}

func (s *Server) memoryByID(w http.ResponseWriter, r *http.Request) error {
	id, err := inspected(r)
	if err != nil {
		return err
	}
	memID, err := pathID(r)
	if err != nil {
		return err
	}
	m, err := s.deps.Inspector.Memory(r.Context(), id, memID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, MemoryDetail{Memory: Memory{
		ID: m.ID, Content: m.Content, Entity: m.Entity, Key: m.Key, Importance: m.Importance, Sources: sourcesOf(m.Sources.V),
		ValidFrom: m.ValidFrom, SupersededAt: m.SupersededAt, SupersededBy: m.SupersededBy, LastAccessed: m.LastAccessed,
		AccessCount: m.AccessCount, GameTime: m.GameTime, CreatedAt: m.CreatedAt,
	}})
	return nil
}

func (s *Server) diff(w http.ResponseWriter, r *http.Request) error {
	id, err := inspected(r)
	if err != nil {
		return err
	}
	compID, err := pathID(r)
	if err != nil {
		return err
	}
	d, err := s.deps.Inspector.Diff(r.Context(), id, compID)
	if err != nil {
		return err
	}
	out := DiffResponse{Compaction: d.Compaction, Replaced: make([]Message, len(d.Replaced)), Lost: d.Lost, Kept: d.Kept}
	if d.Summary != nil {
		m := messageOf(d.Summary)
		out.Summary = &m
	}
	for i := range d.Replaced {
		out.Replaced[i] = messageOf(&d.Replaced[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) asOf(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	q, err := parseQuery(r, "tick")
	if err != nil {
		return err
	}
	if !q.v.Has("tick") {
		return badRequest("tick", "is required: the tick whose context to show")
	}
	t, err := q.positive("tick", 0, maxID)
	if err != nil {
		return err
	}
	a, err := s.deps.Inspector.AsOf(r.Context(), id, t)
	if err != nil {
		return err
	}
	out := AsOfResponse{NPC: id, Tick: a.Tick, Boundary: a.Boundary, Messages: make([]Message, len(a.Messages)),
		Tokens: a.Tokens, Compactions: a.Compactions, Approximate: a.Approximate}
	if rec := a.Record; rec != nil {
		out.Record = &TickRecord{Tick: rec.Tick, At: rec.At, GameTime: rec.GameTime, ContextTokens: rec.ContextTokens,
			Window: rec.Window, Utilization: rec.Utilization, PromptTokens: rec.PromptTokens, CompletionTokens: rec.CompletionTokens,
			LLMCalls: rec.LLMCalls, Actions: rec.Actions, CompactionID: rec.CompactionID, Recovery: rec.Recovery,
			FirstMessageID: rec.FirstMessageID, LastMessageID: rec.LastMessageID}
	}
	if a.Summary != nil {
		m := messageOf(a.Summary)
		out.Summary = &m
	}
	for i := range a.Messages {
		out.Messages[i] = messageOf(&a.Messages[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) timeline(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	q, err := parseQuery(r, "from", "to", "limit")
	if err != nil {
		return err
	}
	var tq inspect.TimelineQuery
	if tq.From, err = q.positive("from", 0, maxID); err != nil {
		return err
	}
	if tq.To, err = q.positive("to", 0, maxID); err != nil {
		return err
	}
	if tq.From > 0 && tq.To > 0 && tq.To < tq.From {
		return badRequest("to", "must not be below from")
	}
	limit, err := q.positive("limit", DefaultTimelineLimit, MaxTimelineLimit)
	if err != nil {
		return err
	}
	tq.Limit = int(limit)
	c, err := s.deps.NPCs.Get(r.Context(), id)
	if err != nil {
		return err
	}
	t, err := s.deps.Inspector.Timeline(r.Context(), id, tq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, TimelineResponse{NPC: id, Window: c.ContextWindow, SleepThreshold: c.Compaction.SleepThreshold,
		EmergencyThreshold: c.Compaction.EmergencyThreshold, Points: t.Points, Compactions: t.Compactions, Truncated: t.Truncated})
	return nil
}
