package api

import (
	"net/http"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
)

func (s *Server) putNPC(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	in, err := s.readSettings(w, r)
	if err != nil {
		return err
	}
	var created bool
	switch inm := r.Header.Get("If-None-Match"); inm {
	case "":
		if created, err = s.deps.Engine.PutNPC(r.Context(), in.character(id)); err != nil {
			return err
		}
	case "*":
		// Create only: a game registering its NPCs at every start keeps
		// the settings edited since.
		if err := s.deps.Engine.CreateNPC(r.Context(), in.character(id)); err != nil {
			return err
		}
		created = true
	default:
		return badRequest("If-None-Match", "only * is supported (create the npc only if it does not exist)")
	}
	// Answer with what was stored, defaults and all, not with what was sent.
	c, err := s.deps.NPCs.Get(r.Context(), id)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, npcOf(c))
	return nil
}

// patchNPC changes single settings: the body is a JSON merge patch of
// NPCSettings, applied to the stored settings and validated as a PUT is.
func (s *Server) patchNPC(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	c, err := s.deps.NPCs.Get(r.Context(), id)
	if err != nil {
		return err
	}
	in, err := patchedSettings(npcOf(c).NPCSettings, body)
	if err != nil {
		return err
	}
	if _, err := s.deps.Engine.PutNPC(r.Context(), in.character(id)); err != nil {
		return err
	}
	if c, err = s.deps.NPCs.Get(r.Context(), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, npcOf(c))
	return nil
}

func (s *Server) getNPC(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	if _, err := parseQuery(r); err != nil {
		return err
	}
	c, err := s.deps.NPCs.Get(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, npcOf(c))
	return nil
}

func (s *Server) listNPCs(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	cs, err := s.deps.NPCs.List(r.Context())
	if err != nil {
		return err
	}
	out := NPCList{NPCs: make([]NPC, len(cs))}
	for i := range cs {
		out.NPCs[i] = npcOf(&cs[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteNPC(w http.ResponseWriter, r *http.Request) error {
	id, err := npcID(r)
	if err != nil {
		return err
	}
	if _, err := parseQuery(r); err != nil {
		return err
	}
	if err := s.deps.Engine.DeleteNPC(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// character converts the request to the NPC with id, leaving every unset
// setting zero for the engine to default.
func (in *NPCSettings) character(id string) *character.Character {
	c := &character.Character{
		ID: id, Name: in.Name, Persona: in.Persona, Model: in.Model,
		ContextWindow: in.ContextWindow, MaxOutputTokens: in.MaxOutputTokens, MaxSteps: in.MaxSteps,
	}
	if cs := in.Compaction; cs != nil {
		c.Compaction = character.CompactionSettings{SleepThreshold: cs.SleepThreshold, EmergencyThreshold: cs.EmergencyThreshold,
			PreserveRecentMessages: cs.PreserveRecentMessages, PreserveRatio: cs.PreserveRatio, Target: cs.Target}
	}
	if m := in.Masking; m != nil {
		c.Masking = character.MaskingSettings{Enabled: m.Enabled, KeepRecentTurns: m.KeepRecentTurns,
			ExemptTools: store.NewJSON(m.ExemptTools), OffloadBytes: m.OffloadBytes}
	}
	if sl := in.Sleep; sl != nil {
		c.Sleep = character.SleepSettings{Cron: sl.Cron, Timezone: sl.Timezone}
	}
	c.Scope = in.Scope
	if at := in.AutoTick; at != nil {
		c.AutoTick = character.AutoTickSettings{Enabled: at.Enabled, DebounceMS: at.DebounceMS, MaxWaitMS: at.MaxWaitMS}
	}
	// nil means "the default tools"; an empty list means none.
	if in.Tools != nil {
		specs := make([]character.ToolSpec, len(in.Tools))
		for i, t := range in.Tools {
			specs[i] = character.ResolveTool(character.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Returns: t.Returns})
		}
		c.Tools = store.NewJSON(specs)
	}
	return c
}

// npcOf is the API view of a stored NPC.
func npcOf(c *character.Character) NPC {
	tools := make([]Tool, len(c.Tools.V))
	for i, t := range c.Tools.V {
		tools[i] = Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Returns: t.Returns}
	}
	exempt := c.Masking.ExemptTools.V
	if exempt == nil {
		exempt = []string{}
	}
	warnings := tick.Warnings(c)
	if warnings == nil {
		warnings = []string{}
	}
	return NPC{
		ID: c.ID,
		NPCSettings: NPCSettings{
			Name: c.Name, Persona: c.Persona, Model: c.Model,
			ContextWindow: c.ContextWindow, MaxOutputTokens: c.MaxOutputTokens, MaxSteps: c.MaxSteps,
			Compaction: &CompactionSettings{SleepThreshold: c.Compaction.SleepThreshold, EmergencyThreshold: c.Compaction.EmergencyThreshold,
				PreserveRecentMessages: c.Compaction.PreserveRecentMessages, PreserveRatio: c.Compaction.PreserveRatio,
				Target: c.Compaction.Target},
			Masking: &MaskingSettings{KeepRecentTurns: c.Masking.KeepRecentTurns, Enabled: c.Masking.Enabled,
				ExemptTools: exempt, OffloadBytes: c.Masking.OffloadBytes},
			Sleep: &SleepSettings{Cron: c.Sleep.Cron, Timezone: c.Sleep.Timezone},
			Tools: tools,
			Scope: c.Scope,
			AutoTick: &AutoTickSettings{Enabled: c.AutoTick.Enabled, DebounceMS: c.AutoTick.DebounceMS,
				MaxWaitMS: c.AutoTick.MaxWaitMS},
		},
		Context:   tick.ContextOf(c),
		Warnings:  warnings,
		CreatedAt: c.CreatedAt,
		UpdatedAt: c.UpdatedAt,
	}
}
