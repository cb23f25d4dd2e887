package character

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/internal/text"
	"github.com/npcd/npcd/store"
)

// Limits on what a profile holds; longer model or game text is cut.
const (
	maxProfileDescription = 2000
	maxFactBytes          = 1000
)

// ProfileUpdate changes what an NPC knows about an entity. Empty fields are
// left as they are; RelationshipDelta values are added to the current scores
// and each score is kept within [-1, 1].
type ProfileUpdate struct {
	Entity            string
	Name              string
	Kind              string
	Description       string
	RelationshipDelta map[string]float64
	SeenAt            time.Time // zero: not a sighting
}

// UpsertProfile creates or updates the profile of an entity.
// u.Entity is a name or a key made by ActorKey; a name resolves as
// resolveEntity says.
func (s *Store) UpsertProfile(ctx context.Context, id string, u ProfileUpdate) (*Profile, error) {
	key := EntityKey(u.Entity)
	if key == "" {
		return nil, &FieldError{Field: "entity", Message: "is required"}
	}
	var p Profile
	err := s.atomically(ctx, func(tx *gorm.DB) error {
		var err error
		if key, err = resolveEntity(tx, id, u.Entity); err != nil {
			return err
		}
		err = tx.Where("character_id = ? AND entity = ?", id, key).Take(&p).Error
		now := time.Now().UTC()
		if errors.Is(err, gorm.ErrRecordNotFound) {
			p = Profile{CharacterID: id, Entity: key, Name: strings.TrimSpace(u.Entity), FirstSeen: u.SeenAt, LastSeen: u.SeenAt}
			if p.FirstSeen.IsZero() {
				p.FirstSeen, p.LastSeen = now, now
			}
		} else if err != nil {
			return err
		}
		if u.Name != "" {
			p.Name = clip(u.Name, 128)
		}
		if u.Kind != "" {
			p.Kind = clip(u.Kind, 32)
		}
		if u.Description != "" {
			p.Description = clip(u.Description, maxProfileDescription)
		}
		if len(u.RelationshipDelta) > 0 {
			if p.Relationship.V == nil {
				p.Relationship.V = map[string]float64{}
			}
			for k, d := range u.RelationshipDelta {
				v := p.Relationship.V[k] + d
				p.Relationship.V[k] = max(-1, min(1, v))
			}
		}
		if !u.SeenAt.IsZero() {
			p.Mentions++
			if u.SeenAt.After(p.LastSeen) {
				p.LastSeen = u.SeenAt
			}
		}
		p.UpdatedAt = now
		return tx.Save(&p).Error
	})
	if err != nil {
		return nil, fmt.Errorf("update profile %q of %q: %w", key, id, err)
	}
	return &p, nil
}

// resolveEntity is the profile key an NPC's knowledge about entity goes
// under. A key made by ActorKey is itself. A name (as the model writes it,
// since the NPC sees names, not ids) is the profile of the game actor most
// recently seen under that name, or else its own name key: a fact about
// "Bob" joins what the NPC knows of the Bob it met, whatever his game id.
func resolveEntity(tx *gorm.DB, id, entity string) (string, error) {
	key := EntityKey(entity)
	if key == "" || IsActorKey(key) {
		return key, nil
	}
	var keys []string
	err := resolveQuery(tx, id, key).Pluck("entity", &keys).Error
	if err != nil {
		return "", fmt.Errorf("resolve entity %q of %q: %w", key, id, err)
	}
	if len(keys) == 1 {
		return keys[0], nil
	}
	return key, nil
}

// resolveQuery selects the profile key of the game actor NPC id most
// recently saw under the name key, if any.
func resolveQuery(tx *gorm.DB, id, key string) *gorm.DB {
	return tx.Session(&gorm.Session{NewDB: true}).Model(&Profile{}).Select("entity").
		Where("character_id = ? AND entity LIKE ? AND LOWER(name) = ?", id, actorKeyPrefix+"%", key).
		Order("last_seen DESC").Limit(1)
}

// NoteSeen records that NPC id perceived entity (a name or a key made by
// ActorKey, resolved as resolveEntity says) at time at: one more mention,
// the last sighting moved forward to at and, when name is not empty, the
// display name. It is UpsertProfile with only Entity, Name and SeenAt set,
// in one update when the profile exists.
func (s *Store) NoteSeen(ctx context.Context, id, entity, name string, at time.Time) error {
	if key := EntityKey(entity); key != "" && !at.IsZero() {
		db := s.q(ctx)
		at = at.UTC()
		cols := map[string]any{
			"mentions":   gorm.Expr("mentions + 1"),
			"last_seen":  gorm.Expr("CASE WHEN last_seen < ? THEN ? ELSE last_seen END", at, at),
			"updated_at": time.Now().UTC(),
		}
		if name != "" {
			cols["name"] = clip(name, 128)
		}
		var n int64
		if st, ok := s.prep.Stmt(ctx, db, noteSeenSQL(name != "", IsActorKey(key))); ok {
			args := []any{at, at, cols["updated_at"]}
			if name != "" {
				args = append(args, cols["name"])
			}
			args = append(args, id)
			if !IsActorKey(key) {
				args = append(args, id, actorKeyPrefix+"%", key)
			}
			res, err := st.ExecContext(ctx, append(args, key)...)
			if err == nil {
				n, err = res.RowsAffected()
			}
			if err != nil {
				return fmt.Errorf("update profile %q of %q: %w", key, id, err)
			}
		} else {
			q := db.Model(&Profile{})
			if IsActorKey(key) {
				q = q.Where("character_id = ? AND entity = ?", id, key)
			} else {
				// The key resolved as resolveEntity does, in the same statement.
				q = q.Where("character_id = ? AND entity = COALESCE((?), ?)", id, resolveQuery(db, id, key), key)
			}
			res := q.UpdateColumns(cols)
			if res.Error != nil {
				return fmt.Errorf("update profile %q of %q: %w", key, id, res.Error)
			}
			n = res.RowsAffected
		}
		if n > 0 {
			return nil
		}
	}
	_, err := s.UpsertProfile(ctx, id, ProfileUpdate{Entity: entity, Name: name, SeenAt: at})
	return err
}

// noteSeenSQL is NoteSeen's update (SQLite), setting the display name or
// not, of an actor key or of a name resolved as resolveEntity does.
func noteSeenSQL(named, actor bool) string {
	q := "UPDATE `profiles` SET `mentions`=mentions + 1,`last_seen`=CASE WHEN last_seen < ? THEN ? ELSE last_seen END,`updated_at`=?"
	if named {
		q += ",`name`=?"
	}
	q += " WHERE character_id = ? AND entity = "
	if actor {
		return q + "?"
	}
	return q + "COALESCE((SELECT `entity` FROM `profiles` WHERE character_id = ? AND entity LIKE ? AND LOWER(name) = ? ORDER BY last_seen DESC LIMIT 1), ?)"
}

// FactAction says what AddFact did.
type FactAction string

// Outcomes of AddFact.
const (
	FactAdded      FactAction = "added"
	FactSuperseded FactAction = "superseded" // added, replacing a current fact
	FactSkipped    FactAction = "skipped"    // the same belief is already held
)

// AddFact records a belief about an entity. A current fact with the same
// content is kept and the new one skipped; a current fact with the same
// non-empty key is superseded by the new one (kept, with SupersededAt and
// SupersededBy set). The profile is created if it does not exist.
func (s *Store) AddFact(ctx context.Context, id string, f Fact) (*Fact, FactAction, error) {
	f.Entity = EntityKey(f.Entity)
	f.Content = clip(strings.TrimSpace(f.Content), maxFactBytes)
	f.Key = clip(strings.ToLower(strings.TrimSpace(f.Key)), 64)
	if f.Entity == "" {
		return nil, "", &FieldError{Field: "entity", Message: "is required"}
	}
	if f.Content == "" {
		return nil, "", &FieldError{Field: "fact", Message: "is required"}
	}
	action := FactAdded
	err := s.atomically(ctx, func(tx *gorm.DB) error {
		var err error
		if f.Entity, err = resolveEntity(tx, id, f.Entity); err != nil {
			return err
		}
		var current []Fact
		if err := tx.Where("character_id = ? AND entity = ? AND superseded_at IS NULL", id, f.Entity).Find(&current).Error; err != nil {
			return err
		}
		for _, c := range current {
			if strings.EqualFold(c.Content, f.Content) {
				action = FactSkipped
				f = c
				return nil
			}
		}
		now := time.Now().UTC()
		if f.ValidFrom.IsZero() {
			f.ValidFrom = now
		}
		f.ID = 0
		f.CharacterID = id
		f.CreatedAt = now
		f.SupersededAt, f.SupersededBy = nil, nil
		if err := tx.Create(&f).Error; err != nil {
			return err
		}
		if f.Key != "" {
			for _, c := range current {
				if c.Key != f.Key {
					continue
				}
				at := f.ValidFrom
				if err := tx.Model(&Fact{}).Where("id = ?", c.ID).Updates(map[string]any{"superseded_at": at, "superseded_by": f.ID}).Error; err != nil {
					return err
				}
				action = FactSuperseded
			}
		}
		var n int64
		if err := tx.Model(&Profile{}).Where("character_id = ? AND entity = ?", id, f.Entity).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return tx.Create(&Profile{CharacterID: id, Entity: f.Entity, Name: f.Entity, FirstSeen: f.ValidFrom, LastSeen: f.ValidFrom, UpdatedAt: now}).Error
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("add fact about %q for %q: %w", f.Entity, id, err)
	}
	return &f, action, nil
}

// SupersedeFact marks fact old as replaced by fact by at time at.
func (s *Store) SupersedeFact(ctx context.Context, id string, old, by int64, at time.Time) error {
	err := s.q(ctx).Model(&Fact{}).Where("character_id = ? AND id = ? AND superseded_at IS NULL", id, old).
		Updates(map[string]any{"superseded_at": at.UTC(), "superseded_by": by}).Error
	if err != nil {
		return fmt.Errorf("supersede fact %d of %q: %w", old, id, err)
	}
	return nil
}

// Profiles returns the NPC's profiles, each with its facts (current and
// superseded, oldest first). With entities given, only those profiles, and
// only current facts.
func (s *Store) Profiles(ctx context.Context, id string, entities ...string) ([]Profile, error) {
	// A tick reads the profiles of those present: the key list is padded
	// so that the statements keep a few shapes, which stay prepared.
	q := s.r(ctx).Where("character_id = ?", id)
	fq := s.r(ctx).Where("character_id = ?", id)
	if len(entities) > 0 {
		keys := make([]string, len(entities))
		for i, e := range entities {
			keys[i] = EntityKey(e)
		}
		keys = store.PadIn(keys)
		q = q.Where("entity IN ?", keys)
		fq = fq.Where("entity IN ? AND superseded_at IS NULL", keys)
	}
	var ps []Profile
	if err := q.Order("entity").Find(&ps).Error; err != nil {
		return nil, fmt.Errorf("profiles of %q: %w", id, err)
	}
	var fs []Fact
	if err := fq.Order("id").Find(&fs).Error; err != nil {
		return nil, fmt.Errorf("facts of %q: %w", id, err)
	}
	byEntity := map[string][]Fact{}
	for _, f := range fs {
		byEntity[f.Entity] = append(byEntity[f.Entity], f)
	}
	for i := range ps {
		ps[i].Facts = byEntity[ps[i].Entity]
		if ps[i].Facts == nil {
			ps[i].Facts = []Fact{}
		}
	}
	return ps, nil
}

// Facts returns facts of an NPC about entity (all entities when empty);
// with current set, only those not superseded.
func (s *Store) Facts(ctx context.Context, id, entity string, current bool) ([]Fact, error) {
	q := s.q(ctx).Where("character_id = ?", id)
	if entity != "" {
		q = q.Where("entity = ?", EntityKey(entity))
	}
	if current {
		q = q.Where("superseded_at IS NULL")
	}
	var fs []Fact
	if err := q.Order("id").Find(&fs).Error; err != nil {
		return nil, fmt.Errorf("facts of %q: %w", id, err)
	}
	return fs, nil
}

func clip(s string, n int) string { return text.Truncate(strings.TrimSpace(s), n) }
