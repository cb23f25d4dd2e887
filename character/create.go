package character

import (
	"context"
	"fmt"
	"time"
)

// Create stores c only if no NPC has its id; otherwise it fails with
// ErrExists and changes nothing. The primary key decides, so two writers
// racing to create the same NPC cannot both succeed.
// c.State.SystemTokens and ToolTokens must already be measured.
func (s *Store) Create(ctx context.Context, c *Character) error {
	var n int64
	if err := s.q(ctx).Model(&Character{}).Where("id = ?", c.ID).Count(&n).Error; err != nil {
		return fmt.Errorf("create npc %q: %w", c.ID, err)
	}
	if n > 0 {
		return fmt.Errorf("%w: npc %q", ErrExists, c.ID)
	}
	now := time.Now().UTC()
	c.CreatedAt, c.UpdatedAt = now, now
	if err := s.q(ctx).Create(c).Error; err != nil {
		if isUniqueViolation(err) {
			return fmt.Errorf("%w: npc %q", ErrExists, c.ID)
		}
		return fmt.Errorf("create npc %q: %w", c.ID, err)
	}
	return nil
}
