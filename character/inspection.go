package character

import (
	"context"
	"fmt"
)

// The reads below serve the admin's inspection of an NPC (package
// inspect): what it holds, counted or in full, never written.

// LiveSummary returns NPC npc's live [CONTEXT SUMMARY], or nil.
func (s *Store) LiveSummary(ctx context.Context, npc string) (*Message, error) {
	var ms []Message
	err := s.q(ctx).Where("character_id = ? AND state = ? AND summary = ?", npc, StateLive, true).
		Order("id DESC").Limit(1).Find(&ms).Error
	if err != nil {
		return nil, fmt.Errorf("summary of %q: %w", npc, err)
	}
	if len(ms) == 0 {
		return nil, nil
	}
	return &ms[0], nil
}

// ArchivedBy returns the messages compaction id of NPC npc archived, oldest
// first.
func (s *Store) ArchivedBy(ctx context.Context, npc string, compactionID int64) ([]Message, error) {
	ms := []Message{}
	if err := s.q(ctx).Where("character_id = ? AND compaction_id = ?", npc, compactionID).Order("id").Find(&ms).Error; err != nil {
		return nil, fmt.Errorf("messages of compaction %d of %q: %w", compactionID, npc, err)
	}
	return ms, nil
}

// EventsOf returns the perceived events behind NPC npc's messages ids (user
// messages), by message id, in arrival order.
func (s *Store) EventsOf(ctx context.Context, npc string, ids []int64) (map[int64][]Event, error) {
	out := map[int64][]Event{}
	for start := 0; start < len(ids); start += 500 {
		end := min(start+500, len(ids))
		var evs []Event
		if err := s.q(ctx).Where("character_id = ? AND message_id IN ?", npc, ids[start:end]).Order("seq").Find(&evs).Error; err != nil {
			return nil, fmt.Errorf("events of %q: %w", npc, err)
		}
		for _, ev := range evs {
			out[*ev.MessageID] = append(out[*ev.MessageID], ev)
		}
	}
	return out, nil
}

// BeliefCounts counts NPC npc's profiles, current facts and superseded
// facts.
func (s *Store) BeliefCounts(ctx context.Context, npc string) (profiles, facts, superseded int, err error) {
	counts := []struct {
		model any
		where string
		dst   *int
	}{
		{&Profile{}, "", &profiles},
		{&Fact{}, "superseded_at IS NULL", &facts},
		{&Fact{}, "superseded_at IS NOT NULL", &superseded},
	}
	for _, c := range counts {
		q := s.q(ctx).Model(c.model).Where("character_id = ?", npc)
		if c.where != "" {
			q = q.Where(c.where)
		}
		var n int64
		if err := q.Count(&n).Error; err != nil {
			return 0, 0, 0, fmt.Errorf("count for %q: %w", npc, err)
		}
		*c.dst = int(n)
	}
	return profiles, facts, superseded, nil
}

// LastTickRecord returns NPC npc's newest tick record, or nil.
func (s *Store) LastTickRecord(ctx context.Context, npc string) (*TickRecord, error) {
	var ticks []TickRecord
	if err := s.q(ctx).Where("character_id = ?", npc).Order("tick DESC").Limit(1).Find(&ticks).Error; err != nil {
		return nil, fmt.Errorf("ticks of %q: %w", npc, err)
	}
	if len(ticks) == 0 {
		return nil, nil
	}
	return &ticks[0], nil
}

// TickRange returns NPC npc's tick records from tick from to tick to (0: no
// bound): with newest > 0 the newest newest of them, newest first;
// otherwise all, oldest first.
func (s *Store) TickRange(ctx context.Context, npc string, from, to int64, newest int) ([]TickRecord, error) {
	q := s.q(ctx).Where("character_id = ?", npc)
	if from > 0 {
		q = q.Where("tick >= ?", from)
	}
	if to > 0 {
		q = q.Where("tick <= ?", to)
	}
	if newest > 0 {
		q = q.Order("tick DESC").Limit(newest)
	} else {
		q = q.Order("tick")
	}
	var recs []TickRecord
	if err := q.Find(&recs).Error; err != nil {
		return nil, fmt.Errorf("ticks of %q: %w", npc, err)
	}
	return recs, nil
}

// MessageState is the part of a message that says whether it is live.
type MessageState struct {
	ID           int64
	State        string
	Summary      bool
	CompactionID *int64
}

// MessageStates returns the state of NPC npc's messages up to id upTo,
// oldest first.
func (s *Store) MessageStates(ctx context.Context, npc string, upTo int64) ([]MessageState, error) {
	var rows []MessageState
	err := s.q(ctx).Model(&Message{}).Select("id, state, summary, compaction_id").
		Where("character_id = ? AND id <= ?", npc, upTo).Order("id").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("history of %q: %w", npc, err)
	}
	return rows, nil
}

// WrittenBy returns the newest message id NPC npc's ticks up to tick
// wrote: from the tick records, or, for ticks written before there were
// records, from the messages' tick numbers; 0 for none.
func (s *Store) WrittenBy(ctx context.Context, npc string, tick int64) (int64, error) {
	var b *int64
	err := s.q(ctx).Model(&TickRecord{}).Select("MAX(last_message_id)").
		Where("character_id = ? AND tick <= ?", npc, tick).Scan(&b).Error
	if err != nil {
		return 0, fmt.Errorf("ticks of %q: %w", npc, err)
	}
	if b != nil && *b > 0 {
		return *b, nil
	}
	err = s.q(ctx).Model(&Message{}).Select("MAX(id)").
		Where("character_id = ? AND tick <= ? AND summary = ?", npc, tick, false).Scan(&b).Error
	if err != nil {
		return 0, fmt.Errorf("history of %q: %w", npc, err)
	}
	if b == nil {
		return 0, nil
	}
	return *b, nil
}
