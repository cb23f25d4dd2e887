package character

import (
	"context"
	"fmt"

	"github.com/npcd/npcd/store"
)

// SetMessageMetadata replaces the metadata of message id (the compaction
// records the summary's own token count once it is written). The message's
// content, and so its token count, is unchanged.
func (s *Store) SetMessageMetadata(ctx context.Context, id int64, meta store.JSON[map[string]any]) error {
	if err := s.q(ctx).Model(&Message{}).Where("id = ?", id).Update("metadata", meta).Error; err != nil {
		return fmt.Errorf("character: metadata of message %d: %w", id, err)
	}
	return nil
}
