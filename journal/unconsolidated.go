package journal

import (
	"context"
	"fmt"
)

// pendingWhere selects the entries waiting for consolidation, in the words
// of the partial index that holds them alone (journal migration 6): a
// database uses a partial index only for a query whose condition it can
// tell implies the index's, so the type is written out, not a parameter.
// A long life's context_synthesis entries and consolidated entries are
// never read to find the few waiting.
const pendingWhere = "consolidated_at IS NULL AND type <> '" + TypeContextSynthesis + "'"

// CountUnconsolidated returns how many entries of NPC id wait for
// consolidation (context_synthesis entries never do: they are summaries of
// what is already archived and searchable).
func (s *Store) CountUnconsolidated(ctx context.Context, id string) (int, error) {
	var n int64
	err := s.q(ctx).Model(&Entry{}).Where("character_id = ? AND "+pendingWhere, id).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count unconsolidated entries of %q: %w", id, err)
	}
	return int(n), nil
}

// Unconsolidated returns up to limit entries of NPC id waiting for
// consolidation, oldest first.
func (s *Store) Unconsolidated(ctx context.Context, id string, limit int) ([]Entry, error) {
	var es []Entry
	err := s.q(ctx).Where("character_id = ? AND "+pendingWhere, id).
		Order("id").Limit(limit).Find(&es).Error
	if err != nil {
		return nil, fmt.Errorf("unconsolidated entries of %q: %w", id, err)
	}
	return es, nil
}
