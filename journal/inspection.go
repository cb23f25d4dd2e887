package journal

import (
	"context"
	"fmt"
)

// The reads below serve the admin's inspection of an NPC (package
// inspect).

// CountByType counts NPC npc's journal entries by type. Entries of the
// common types are in no index of types (journal migration 8), so it
// reads the NPC's rows: some 200 ms for 100,000 entries.
func (s *Store) CountByType(ctx context.Context, npc string) (map[string]int, error) {
	var rows []struct {
		K string
		N int
	}
	if err := s.q(ctx).Model(&Entry{}).Select("type AS k, count(*) AS n").Where("character_id = ?", npc).
		Group("type").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("journal of %q: %w", npc, err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.K] = r.N
	}
	return out, nil
}

// CountMemories counts NPC npc's current and superseded memories.
func (s *Store) CountMemories(ctx context.Context, npc string) (current, superseded int, err error) {
	for _, c := range []struct {
		where string
		dst   *int
	}{{"superseded_at IS NULL", &current}, {"superseded_at IS NOT NULL", &superseded}} {
		var n int64
		if err := s.q(ctx).Model(&Memory{}).Where("character_id = ?", npc).Where(c.where).Count(&n).Error; err != nil {
			return 0, 0, fmt.Errorf("count for %q: %w", npc, err)
		}
		*c.dst = int(n)
	}
	return current, superseded, nil
}

// MemoryTexts returns every memory of NPC npc, current or superseded,
// oldest first, with only its id, content and entity.
func (s *Store) MemoryTexts(ctx context.Context, npc string) ([]Memory, error) {
	var mems []Memory
	if err := s.q(ctx).Select("id, content, entity").Where("character_id = ?", npc).Order("id").Find(&mems).Error; err != nil {
		return nil, fmt.Errorf("memories of %q: %w", npc, err)
	}
	return mems, nil
}

// EntryTexts returns every journal entry of NPC npc, oldest first, with
// only its id and content.
func (s *Store) EntryTexts(ctx context.Context, npc string) ([]Entry, error) {
	var entries []Entry
	if err := s.q(ctx).Select("id, content").Where("character_id = ?", npc).Order("id").Find(&entries).Error; err != nil {
		return nil, fmt.Errorf("journal of %q: %w", npc, err)
	}
	return entries, nil
}
