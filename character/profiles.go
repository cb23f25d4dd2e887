package character

import (
	"context"
	"database/sql"
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
		Where(actorNamed(store.IsSQLite(tx), false), id, key).Order("last_seen DESC").Limit(1)
}

// NoteSeen records that NPC id perceived entity (a name or a key made by
// ActorKey, resolved as resolveEntity says) at time at: one more mention,
// the last sighting moved forward to at and, when name is not empty, the
// display name. It is UpsertProfile with only Entity, Name and SeenAt set,
// in one update when the profile exists.
func (s *Store) NoteSeen(ctx context.Context, id, entity, name string, at time.Time) error {
	if key := EntityKey(entity); key != "" && !at.IsZero() {
		at = at.UTC()
		updated := time.Now().UTC()
		named := clip(name, 128)
		var n int64
		if st, ok := s.prep.Stmt(ctx, s.db, noteSeenSQLs[b2i(name != "")][b2i(IsActorKey(key))]); ok {
			args := []any{at, at, updated}
			if name != "" {
				args = append(args, named)
			}
			args = append(args, id)
			if !IsActorKey(key) {
				args = append(args, id, key)
			}
			res, err := st.ExecContext(ctx, append(args, key)...)
			if err == nil {
				n, err = res.RowsAffected()
			}
			if err == nil && n == 0 {
				// A first sighting: the profile UpsertProfile would make,
				// in one statement. No profile under the name's actor
				// exists (the update would have found it), so the key is
				// the name's own.
				n, err = s.firstSeen(ctx, id, key, entity, name, at, updated)
			}
			if err != nil {
				return fmt.Errorf("update profile %q of %q: %w", key, id, err)
			}
		} else {
			db := s.q(ctx)
			cols := map[string]any{
				"mentions":   gorm.Expr("mentions + 1"),
				"last_seen":  gorm.Expr("CASE WHEN last_seen < ? THEN ? ELSE last_seen END", at, at),
				"updated_at": updated,
			}
			if name != "" {
				cols["name"] = named
			}
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

// firstSeen inserts the profile UpsertProfile makes of an entity first
// seen at at (SQLite, prepared), and reports 0 when it cannot or when the
// profile exists.
func (s *Store) firstSeen(ctx context.Context, id, key, entity, name string, at, updated time.Time) (int64, error) {
	st, ok := s.prep.Stmt(ctx, s.db, firstSeenSQL)
	if !ok {
		return 0, nil
	}
	shown := strings.TrimSpace(entity)
	if name != "" {
		shown = clip(name, 128)
	}
	var rel store.JSON[map[string]float64]
	res, err := st.ExecContext(ctx, id, key, shown, "", "", rel, 1, at, at, updated)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// firstSeenSQL inserts a profile unless one exists under its key.
const firstSeenSQL = "INSERT INTO `profiles` (`character_id`,`entity`,`name`,`kind`,`description`,`relationship`,`mentions`,`first_seen`,`last_seen`,`updated_at`) " +
	"VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT (`character_id`,`entity`) DO NOTHING"

// noteSeenSQLs holds noteSeenSQL(named, actor) at [named][actor], 0 for
// false and 1 for true.
var noteSeenSQLs = [2][2]string{
	{noteSeenSQL(false, false), noteSeenSQL(false, true)},
	{noteSeenSQL(true, false), noteSeenSQL(true, true)},
}

// b2i is 1 for true and 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
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
	// The actor's profile under the name, through the index of their names
	// (migration character v12).
	return q + "COALESCE((SELECT `entity` FROM `profiles` WHERE " + actorNamed(true, false) + " ORDER BY last_seen DESC LIMIT 1), ?)"
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
	fs, actions, err := s.AddFacts(ctx, id, f)
	if err != nil {
		return nil, "", err
	}
	return &fs[0], actions[0], nil
}

// AddFacts records beliefs in order, as AddFact would one after the other
// (a fact may skip or supersede one added earlier in the same call), and
// returns each fact as stored (the one kept when skipped) with what was
// done. Whatever their number it reads the entities and their current
// facts once, inserts the new facts and the new profiles in one statement
// each (per 100 rows) and updates once per fact that supersedes some. When
// any fact is invalid, none is recorded.
func (s *Store) AddFacts(ctx context.Context, id string, facts ...Fact) ([]Fact, []FactAction, error) {
	fs := make([]Fact, len(facts))
	for i, f := range facts {
		f.Entity = EntityKey(f.Entity)
		f.Content = clip(strings.TrimSpace(f.Content), maxFactBytes)
		f.Key = clip(strings.ToLower(strings.TrimSpace(f.Key)), 64)
		if f.Entity == "" {
			return nil, nil, &FieldError{Field: "entity", Message: "is required"}
		}
		if f.Content == "" {
			return nil, nil, &FieldError{Field: "fact", Message: "is required"}
		}
		fs[i] = f
	}
	actions := make([]FactAction, len(fs))
	err := s.atomically(ctx, func(tx *gorm.DB) error {
		entities, err := resolveEntities(tx, id, fs)
		if err != nil {
			return err
		}
		var stored []Fact
		if err := tx.Where("character_id = ? AND entity IN ? AND superseded_at IS NULL", id, entities).Order("id").Find(&stored).Error; err != nil {
			return err
		}
		current := map[string][]*Fact{} // by entity, oldest first
		for i := range stored {
			current[stored[i].Entity] = append(current[stored[i].Entity], &stored[i])
		}
		now := time.Now().UTC()
		// What each new fact supersedes, by index in fs; filled once ids are known.
		replaces := make([][]*Fact, len(fs))
		var fresh []*Fact
	facts:
		for i := range fs {
			f := &fs[i]
			for _, c := range current[f.Entity] {
				if strings.EqualFold(c.Content, f.Content) {
					actions[i] = FactSkipped
					*f = *c // the fact kept; its id is known once inserted
					replaces[i] = []*Fact{c}
					continue facts
				}
			}
			actions[i] = FactAdded
			if f.ValidFrom.IsZero() {
				f.ValidFrom = now
			}
			f.ID = 0
			f.CharacterID = id
			f.CreatedAt = now
			f.SupersededAt, f.SupersededBy = nil, nil
			fresh = append(fresh, f)
			var kept []*Fact
			for _, c := range current[f.Entity] {
				if f.Key != "" && c.Key == f.Key {
					replaces[i] = append(replaces[i], c)
					actions[i] = FactSuperseded
				} else {
					kept = append(kept, c)
				}
			}
			current[f.Entity] = append(kept, f)
		}
		if len(fresh) == 0 {
			return nil
		}
		if err := tx.CreateInBatches(fresh, 100).Error; err != nil {
			return err
		}
		for i := range fs {
			if actions[i] == FactSkipped {
				fs[i] = *replaces[i][0] // a fact of this call has its id now
				continue
			}
			var ids []int64
			for _, c := range replaces[i] {
				ids = append(ids, c.ID)
			}
			if len(ids) == 0 {
				continue
			}
			if err := tx.Model(&Fact{}).Where("id IN ?", ids).Updates(map[string]any{"superseded_at": fs[i].ValidFrom, "superseded_by": fs[i].ID}).Error; err != nil {
				return err
			}
		}
		// A profile for every entity a new fact is about, from the first one.
		var have []string
		if err := tx.Model(&Profile{}).Where("character_id = ? AND entity IN ?", id, entities).Pluck("entity", &have).Error; err != nil {
			return err
		}
		known := map[string]bool{}
		for _, e := range have {
			known[e] = true
		}
		var ps []Profile
		for _, f := range fresh {
			if !known[f.Entity] {
				known[f.Entity] = true
				ps = append(ps, Profile{CharacterID: id, Entity: f.Entity, Name: f.Entity, FirstSeen: f.ValidFrom, LastSeen: f.ValidFrom, UpdatedAt: now})
			}
		}
		if len(ps) == 0 {
			return nil
		}
		return tx.CreateInBatches(ps, 100).Error
	})
	if err != nil {
		return nil, nil, fmt.Errorf("add fact about %q for %q: %w", fs[0].Entity, id, err)
	}
	return fs, actions, nil
}

// resolveEntities resolves the entity of each fact as resolveEntity does,
// in place, with one query, and returns the distinct entities.
func resolveEntities(tx *gorm.DB, id string, fs []Fact) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for _, f := range fs {
		if !IsActorKey(f.Entity) && !seen[f.Entity] {
			seen[f.Entity] = true
			names = append(names, f.Entity)
		}
	}
	actor := map[string]string{}
	if len(names) > 0 {
		var rows []struct{ Entity, Lname string }
		err := tx.Model(&Profile{}).Select("entity, LOWER(name) AS lname").
			Where(actorNamed(store.IsSQLite(tx), true), id, names).
			Order("last_seen DESC").Scan(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("resolve entities of %q: %w", id, err)
		}
		for _, r := range rows {
			if actor[r.Lname] == "" {
				actor[r.Lname] = r.Entity
			}
		}
	}
	var out []string
	done := map[string]bool{}
	for i := range fs {
		if a, ok := actor[fs[i].Entity]; ok && !IsActorKey(fs[i].Entity) {
			fs[i].Entity = a
		}
		if !done[fs[i].Entity] {
			done[fs[i].Entity] = true
			out = append(out, fs[i].Entity)
		}
	}
	return out, nil
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
	var keys []string
	if len(entities) > 0 {
		keys = make([]string, len(entities))
		for i, e := range entities {
			keys[i] = EntityKey(e)
		}
		keys = store.PadIn(keys)
		if stmt := store.Stmt(ctx, s.hot, presentSQL(len(keys))); stmt != nil {
			ps, err := scanPresent(ctx, stmt, id, keys)
			if err != nil {
				return nil, fmt.Errorf("profiles of %q: %w", id, err)
			}
			return ps, nil
		}
	}
	// Built only off the prepared path: each costs a gorm session.
	q := s.r(ctx).Where("character_id = ?", id)
	fq := s.r(ctx).Where("character_id = ?", id)
	if len(entities) > 0 {
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

// presentSQL reads the profiles of n keys of an NPC with their current
// facts in one statement (SQLite, its times read as text: see
// store.TimeText): a profile without facts is one row with the fact's
// columns null, a profile with facts one row per fact, ordered as
// Profiles orders them.
func presentSQL(n int) string {
	if n < len(presentSQLs) && presentSQLs[n] != "" {
		return presentSQLs[n]
	}
	return buildPresentSQL(n)
}

// presentSQLs holds presentSQL's text for the padded lengths of small lists.
var presentSQLs = func() (out [65]string) {
	for n := 1; n < len(out); n *= 2 {
		out[n] = buildPresentSQL(n)
	}
	return out
}()

func buildPresentSQL(n int) string {
	return "SELECT p.id,p.entity,p.name,p.kind,p.description,p.relationship,p.mentions,+p.first_seen,+p.last_seen,+p.updated_at," +
		"f.id,f.\"key\",f.content,f.source,f.sources,+f.valid_from,+f.superseded_at,f.superseded_by,+f.created_at " +
		"FROM profiles p LEFT JOIN facts f ON f.character_id = p.character_id AND f.entity = p.entity AND f.superseded_at IS NULL " +
		"WHERE p.character_id = ? AND p.entity IN (?" + strings.Repeat(",?", n-1) + ") ORDER BY p.entity, f.id"
}

// scanPresent runs stmt, a presentSQL, for NPC id and keys.
func scanPresent(ctx context.Context, stmt *sql.Stmt, id string, keys []string) ([]Profile, error) {
	args := make([]any, 0, 1+len(keys))
	args = append(args, id)
	for _, k := range keys {
		args = append(args, k)
	}
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ps := []Profile{} // as gorm gives: empty, not nil
	for rows.Next() {
		var p Profile
		var fid, by sql.NullInt64
		var key, content, source, sources sql.NullString
		var from, created, superseded sql.NullTime
		if err := rows.Scan(&p.ID, &p.Entity, &p.Name, &p.Kind, &p.Description, &p.Relationship, &p.Mentions,
			store.TimeText{T: &p.FirstSeen}, store.TimeText{T: &p.LastSeen}, store.TimeText{T: &p.UpdatedAt}, &fid, &key, &content,
			&source, &sources, store.NullTimeText{T: &from}, store.NullTimeText{T: &superseded}, &by,
			store.NullTimeText{T: &created}); err != nil {
			return nil, err
		}
		if n := len(ps); n == 0 || ps[n-1].ID != p.ID {
			p.CharacterID = id
			p.Facts = []Fact{}
			ps = append(ps, p)
		}
		if !fid.Valid {
			continue
		}
		f := Fact{ID: fid.Int64, CharacterID: id, Entity: p.Entity, Key: key.String, Content: content.String, Source: source.String,
			ValidFrom: from.Time, CreatedAt: created.Time}
		if sources.Valid {
			if err := f.Sources.Scan(sources.String); err != nil {
				return nil, err
			}
		}
		if superseded.Valid {
			f.SupersededAt = &superseded.Time
		}
		if by.Valid {
			f.SupersededBy = &by.Int64
		}
		last := &ps[len(ps)-1]
		last.Facts = append(last.Facts, f)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return ps, rows.Close()
}
