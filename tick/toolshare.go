package tick

import (
	"encoding/json"
	"runtime"
	"sync"
	"weak"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/tools"
)

// toolShare lets the NPCs that declare the same tools share one copy of
// them: the declarations as decoded, which the settings held of each NPC
// keep (Engine.npc), and the compiled set its ticks use (Engine.toolSet).
// A world's NPCs mostly declare one of a few tool sets, and each copy was
// some 60 objects that every collection traced again, 60,000 in a world
// of 1,000 NPCs. The share holds its copies weakly: one no NPC's cached
// tools hold any more is collected, and its entry dropped.
type toolShare struct {
	mu    sync.Mutex
	byKey map[string]weak.Pointer[sharedTools] // by the declarations' JSON
}

// sharedTools is one copy of a tool set's declarations, and its compiled
// set once one is kept (adopt). Neither is ever changed once shared.
type sharedTools struct {
	specs []character.ToolSpec
	mu    sync.Mutex
	set   *tools.Set
}

func newToolShare() *toolShare {
	return &toolShare{byKey: map[string]weak.Pointer[sharedTools]{}}
}

// of returns the copy of the declarations specs the share holds: the one
// made for an NPC that declared the same (as their JSON tells), else one of
// specs themselves. Declarations that cannot be encoded are not shared.
func (s *toolShare) of(specs []character.ToolSpec) *sharedTools {
	raw, err := json.Marshal(specs)
	if err != nil {
		return &sharedTools{specs: specs}
	}
	key := string(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.byKey[key].Value(); st != nil {
		return st
	}
	st := &sharedTools{specs: specs}
	s.byKey[key] = weak.Make(st)
	runtime.AddCleanup(st, s.collected, key)
	return st
}

// collected drops the entry of key once the copy it named was collected,
// unless another copy took its place since.
func (s *toolShare) collected(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey[key].Value() == nil {
		delete(s.byKey, key)
	}
}

// compiled returns the compiled set kept with st, nil before one is.
func (st *sharedTools) compiled() *tools.Set {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.set
}

// adopt returns the compiled set of st's declarations: the one kept, else
// set, which is kept.
func (st *sharedTools) adopt(set *tools.Set) *tools.Set {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.set == nil {
		st.set = set
	}
	return st.set
}
