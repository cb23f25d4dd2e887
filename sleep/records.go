package sleep

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Records reads compaction records, for the admin's inspection of an NPC;
// it never writes, so its database may be opened read-only.
type Records struct{ db *gorm.DB }

// NewRecords returns the compaction records of db.
func NewRecords(db *gorm.DB) *Records { return &Records{db: db} }

func (r *Records) q(ctx context.Context) *gorm.DB { return r.db.WithContext(ctx) }

// CountByTrigger counts NPC npc's compactions by trigger.
func (r *Records) CountByTrigger(ctx context.Context, npc string) (map[string]int, error) {
	var rows []struct {
		K string
		N int
	}
	// "trigger" is an SQL keyword: quote it the dialect's way.
	trig := r.db.Statement.Quote("trigger")
	if err := r.q(ctx).Model(&Record{}).Select(trig+" AS k, count(*) AS n").Where("character_id = ?", npc).
		Group(trig).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("compactions of %q: %w", npc, err)
	}
	out := map[string]int{}
	for _, row := range rows {
		out[row.K] = row.N
	}
	return out, nil
}

// Last returns NPC npc's newest compaction, or nil.
func (r *Records) Last(ctx context.Context, npc string) (*Record, error) {
	var last []Record
	if err := r.q(ctx).Where("character_id = ?", npc).Order("id DESC").Limit(1).Find(&last).Error; err != nil {
		return nil, fmt.Errorf("compactions of %q: %w", npc, err)
	}
	if len(last) == 0 {
		return nil, nil
	}
	return &last[0], nil
}

// Find returns compaction id of NPC npc, or nil when there is none.
func (r *Records) Find(ctx context.Context, npc string, id int64) (*Record, error) {
	var rs []Record
	if err := r.q(ctx).Where("character_id = ? AND id = ?", npc, id).Limit(1).Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("compaction %d of %q: %w", id, npc, err)
	}
	if len(rs) == 0 {
		return nil, nil
	}
	return &rs[0], nil
}

// ByIDs returns NPC npc's compactions with the given ids, oldest first;
// ids that name none are left out.
func (r *Records) ByIDs(ctx context.Context, npc string, ids []int64) ([]Record, error) {
	rs := []Record{}
	if len(ids) == 0 {
		return rs, nil
	}
	if err := r.q(ctx).Where("character_id = ? AND id IN ?", npc, ids).Order("id").Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("compactions of %q: %w", npc, err)
	}
	return rs, nil
}

// All returns every compaction of NPC npc, oldest first.
func (r *Records) All(ctx context.Context, npc string) ([]Record, error) {
	var rs []Record
	if err := r.q(ctx).Where("character_id = ?", npc).Order("id").Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("compactions of %q: %w", npc, err)
	}
	return rs, nil
}
