package character

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// TickOutcome is what a tick answered, kept so the answer is never lost: a
// game whose call timed out fetches it again by tick or by the idempotency
// key it sent, and the action feed reads committed outcomes in order of ID.
// A non-idle tick stores its outcome in the transaction that commits the
// turn; an idle tick stores one only when it carried a key, so a retry with
// that key gets the same answer.
type TickOutcome struct {
	// ID is the feed's cursor. It grows in commit order and is never
	// reused, even after the newest rows are deleted with their NPC.
	ID          int64   `gorm:"primaryKey;autoIncrement"`
	CharacterID string  `gorm:"size:64;not null;index:idx_outcomes_char_tick,priority:1"`
	Tick        int64   `gorm:"not null;index:idx_outcomes_char_tick,priority:2"`
	Key         *string `gorm:"size:128"` // unique where set (migration character v8)
	Idle        bool    `gorm:"not null"`
	At          time.Time
	// Body is the tick's response as the game got it (JSON).
	Body string `gorm:"not null"`
}

// outcomeFeedLock is the PostgreSQL advisory lock that orders outcome
// inserts. A sequence hands out ids in insert order, not commit order, so a
// feed reader could pass a lower id still uncommitted and never see it;
// inserting under a transaction-scoped lock, as the last write before
// commit, makes the two orders agree. SQLite has one writer at a time and
// needs none.
const outcomeFeedLock = 0x6e70636466656564 // "npcdfeed"

// AddOutcome stores a tick's outcome. Inside the transaction that commits a
// turn, it must be that transaction's last write (see outcomeFeedLock). A
// key the NPC already used is refused with ErrDuplicateKey.
func (s *Store) AddOutcome(ctx context.Context, o *TickOutcome) error {
	// The gorm session that carries ctx is made only for the statements
	// that run through gorm, not for the prepared insert.
	var q *gorm.DB
	if s.db.Dialector.Name() == "postgres" {
		q = s.q(ctx)
		if err := q.Exec("SELECT pg_advisory_xact_lock(?)", int64(outcomeFeedLock)).Error; err != nil {
			return fmt.Errorf("record outcome of tick %d of %q: %w", o.Tick, o.CharacterID, err)
		}
	}
	var err error
	if st, ok := s.prep.Stmt(ctx, s.db, insertOutcomesSQL[1]); ok {
		err = st.QueryRowContext(ctx, outcomeArgs(make([]any, 0, len(outcomeColumns)), o)...).Scan(&o.ID)
	} else {
		if q == nil {
			q = s.q(ctx)
		}
		err = q.Create(o).Error
	}
	if err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) || isUniqueViolation(err) {
			return fmt.Errorf("%w: npc %q", ErrDuplicateKey, o.CharacterID)
		}
		return fmt.Errorf("record outcome of tick %d of %q: %w", o.Tick, o.CharacterID, err)
	}
	return nil
}

// OutcomeByKey returns the outcome NPC id stored under key.
func (s *Store) OutcomeByKey(ctx context.Context, id, key string) (*TickOutcome, error) {
	return s.outcome(s.q(ctx).Where("character_id = ? AND key = ?", id, key), id)
}

// OutcomeByTick returns the outcome of NPC id's committed tick n.
func (s *Store) OutcomeByTick(ctx context.Context, id string, n int64) (*TickOutcome, error) {
	return s.outcome(s.q(ctx).Where("character_id = ? AND tick = ? AND idle = ?", id, n, false), id)
}

func (s *Store) outcome(q *gorm.DB, id string) (*TickOutcome, error) {
	var o TickOutcome
	err := q.Order("id").Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("%w: no such tick outcome of %q", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("tick outcome of %q: %w", id, err)
	}
	return &o, nil
}

// FeedQuery selects outcomes for the action feed.
type FeedQuery struct {
	After int64    // only outcomes with a greater ID
	Limit int      // at most this many
	NPCs  []string // only these NPCs; none means all
	Scope string   // only NPCs of this scope; empty means all
}

// Outcomes returns the committed outcomes of non-idle ticks after the
// cursor, oldest first.
func (s *Store) Outcomes(ctx context.Context, fq FeedQuery) ([]TickOutcome, error) {
	q := s.q(ctx).Where("id > ? AND idle = ?", fq.After, false)
	if len(fq.NPCs) > 0 {
		q = q.Where("character_id IN ?", fq.NPCs)
	}
	if fq.Scope != "" {
		q = q.Where("character_id IN (?)", s.q(ctx).Model(&Character{}).Select("id").Where("scope = ?", fq.Scope))
	}
	var os []TickOutcome
	if err := q.Order("id").Limit(fq.Limit).Find(&os).Error; err != nil {
		return nil, fmt.Errorf("tick outcomes: %w", err)
	}
	return os, nil
}

// PruneOutcomes deletes up to limit of the oldest tick outcomes stored
// before before, of every NPC, in one statement, and returns how many it
// deleted. Their answers, keys and feed entries go with them: a retry with
// a pruned key ticks again, GET of a pruned tick is not found, and a feed
// reader whose cursor is older reads on from the oldest outcome kept. Ids
// are never reused (the table is AUTOINCREMENT on SQLite, a sequence on
// PostgreSQL), so cursors stay valid. Callers prune in batches, each its
// own short transaction, until fewer than limit are deleted.
func (s *Store) PruneOutcomes(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	oldest := s.q(ctx).Model(&TickOutcome{}).Select("id").Where("at < ?", before.UTC()).Order("at").Limit(limit)
	res := s.q(ctx).Where("id IN (?)", oldest).Delete(&TickOutcome{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune tick outcomes: %w", res.Error)
	}
	return int(res.RowsAffected), nil
}

// isUniqueViolation reports a unique constraint refusing an insert, in the
// words of SQLite or PostgreSQL (gorm translates neither by default).
func isUniqueViolation(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE 23505")
}
