package character

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// Store reads and writes NPCs and everything they own. A Store is safe for
// concurrent use; it does not serialize writers to one NPC (the tick engine's
// per-NPC lock does).
type Store struct {
	db   *gorm.DB
	hot  *gorm.DB // db with its statements kept prepared (store.Prepared); nil inside a transaction
	inTx bool
	// prep keeps a tick commit's statements prepared (SQLite), shared by
	// the Store and those WithTx makes of it.
	prep *store.TxStmts
	// nextMsg is the id the next message inserted is expected to get (0:
	// unknown), shared like prep: the id after the last one an insert
	// returned. A tool result is measured with it before its insert, since
	// its placeholders name its id; a wrong guess costs a second measure.
	nextMsg *atomic.Int64
	// clock is the world's clock as this Store knows it (WorldClock),
	// shared like prep.
	clock *worldClock
}

// NewStore returns a Store over db, whose schema Migrations has applied.
func NewStore(db *gorm.DB) *Store {
	return &Store{db: db, hot: store.Prepared(db), prep: &store.TxStmts{}, nextMsg: new(atomic.Int64), clock: &worldClock{}}
}

// WithTx returns a Store whose calls run inside the transaction tx.
func (s *Store) WithTx(tx *gorm.DB) *Store {
	return &Store{db: tx, inTx: true, prep: s.prep, nextMsg: s.nextMsg, clock: s.clock}
}

// atomically runs fn in a transaction of its own, or, for a Store made by
// WithTx, in the caller's: the caller's transaction stores all or nothing
// already, and a savepoint would only add statements to every tick.
func (s *Store) atomically(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if s.inTx {
		return fn(s.q(ctx))
	}
	return store.RunTransaction(ctx, s.db, fn)
}

// DB returns the handle the Store uses (a transaction inside WithTx).
func (s *Store) DB() *gorm.DB { return s.db }

// Migrations is this package's schema, in order.
func Migrations() []store.Migration {
	return []store.Migration{{
		Component: "character", Version: 1, Name: "characters, messages, events, profiles, facts, ticks",
		Up: func(tx *gorm.DB) error {
			return tx.AutoMigrate(&Character{}, &Message{}, &Event{}, &Profile{}, &Fact{}, &TickRecord{})
		},
	}, {
		Component: "character", Version: 2, Name: "history revision, compaction target and note",
		Up: func(tx *gorm.DB) error {
			// Version 1 creates the columns on a new database (it migrates
			// the current struct); an older one gains them here.
			m := tx.Migrator()
			for _, col := range []string{"HistoryRev", "CompactionNote"} {
				if !m.HasColumn(&Character{}, col) {
					if err := m.AddColumn(&Character{}, col); err != nil {
						return err
					}
				}
			}
			if !m.HasColumn(&Character{}, "compaction_target") {
				if err := tx.Exec("ALTER TABLE characters ADD COLUMN compaction_target REAL").Error; err != nil {
					return err
				}
			}
			return tx.Model(&Character{}).Where("compaction_target IS NULL OR compaction_target = 0").
				UpdateColumn("compaction_target", DefaultCompactionTarget).Error
		},
	}, {
		Component: "character", Version: 3, Name: "tick outcomes",
		Up: func(tx *gorm.DB) error { return tx.AutoMigrate(&TickOutcome{}) },
	}, {
		// WorldClock reads the latest game time of all NPCs.
		Component: "character", Version: 4, Name: "index on the game time",
		Up: func(tx *gorm.DB) error {
			return tx.Exec("CREATE INDEX IF NOT EXISTS idx_characters_game_time ON characters (game_time)").Error
		},
	}, {
		// Events carry the game's stable actor id; profiles key on it, so
		// their key (ActorKey: "@" and up to 128 characters) is longer.
		Component: "character", Version: 5, Name: "actor ids",
		Up: func(tx *gorm.DB) error {
			if !tx.Migrator().HasColumn(&Event{}, "ActorID") {
				if err := tx.Migrator().AddColumn(&Event{}, "ActorID"); err != nil {
					return err
				}
			}
			if tx.Dialector.Name() != "postgres" {
				return nil // SQLite does not bound text by its declared size
			}
			for _, table := range []string{"profiles", "facts"} {
				if err := tx.Exec("ALTER TABLE " + table + " ALTER COLUMN entity TYPE varchar(192)").Error; err != nil {
					return err
				}
			}
			return nil
		},
	}, {
		Component: "character", Version: 6, Name: "scopes and auto-tick settings",
		Up: func(tx *gorm.DB) error {
			m := tx.Migrator()
			for _, col := range []string{"scope", "auto_tick_enabled", "auto_tick_debounce_ms", "auto_tick_max_wait_ms"} {
				if !m.HasColumn(&Character{}, col) {
					if err := m.AddColumn(&Character{}, col); err != nil {
						return err
					}
				}
			}
			if err := tx.Exec("CREATE INDEX IF NOT EXISTS idx_characters_scope ON characters (scope)").Error; err != nil {
				return err
			}
			return tx.Model(&Character{}).Where("auto_tick_debounce_ms IS NULL OR auto_tick_debounce_ms = 0").
				Updates(map[string]any{"auto_tick_enabled": false, "auto_tick_debounce_ms": DefaultAutoTickDebounceMS,
					"auto_tick_max_wait_ms": DefaultAutoTickMaxWaitMS, "scope": ""}).Error
		},
	}, {
		// PruneOutcomes finds the outcomes past their retention by time.
		Component: "character", Version: 7, Name: "index on the time of tick outcomes",
		Up: func(tx *gorm.DB) error {
			return tx.Exec("CREATE INDEX IF NOT EXISTS idx_outcomes_at ON tick_outcomes (at)").Error
		},
	}, {
		// Every row a tick writes went into indexes no query reads it by:
		// each message into one on its tool call id (nothing looks a
		// message up by it) and one on its compaction (NULL until archived),
		// a consumed event into the pending index again, an outcome into
		// one on its idempotency key (NULL without one). Partial indexes
		// hold only the rows looked up. (The events' index on their game id
		// stays whole: it is the one that finds an NPC's events.)
		Component: "character", Version: 8, Name: "partial indexes of messages, events and outcomes",
		Up: func(tx *gorm.DB) error { return store.Exec(tx, leanIndexes...) },
	}, {
		// The index of the masking query (idx_messages_char_mask: NPC,
		// state, role, masked, turn) took an entry of every message
		// written, and two more at every archiving and every masking.
		// A tick masks by the ids its held history gives, and a sleep's
		// masking reads only the NPC's live rows, found by
		// idx_messages_char_state_id: few, since the context bounds them.
		Component: "character", Version: 9, Name: "no index for the masking query",
		Up: func(tx *gorm.DB) error {
			return tx.Exec("DROP INDEX IF EXISTS idx_messages_char_mask").Error
		},
	}, {
		// A tick shows the profiles of those present (Profiles); the
		// revision tells it whether the lines it showed last still hold
		// (Glance.ProfileRev). Triggers count every change of what a line
		// shows, whoever writes it (another process sharing the file
		// included): a sighting that only adds a mention or moves the last
		// sighting within its day changes nothing shown.
		Component: "character", Version: 10, Name: "profile revisions",
		// PostgreSQL keeps no revision: its glance reads none, and a
		// revision's row, locked by every writer of an NPC's profiles
		// after the rows they change, could deadlock two of them.
		SQLite: func(tx *gorm.DB) error { return store.Exec(tx, profileRevSQLite...) },
	}, {
		// Every tick moves its NPC's game time, and with it the NPC's
		// entry in the index of game times: two pages more to write at
		// every commit, for a query that runs when an event is dated
		// ahead of npcd's own clock. The Store keeps the world's clock
		// instead (WorldClock).
		Component: "character", Version: 11, Name: "no index on the game time",
		Up: func(tx *gorm.DB) error {
			return tx.Exec("DROP INDEX IF EXISTS idx_characters_game_time").Error
		},
	}, {
		// A name is resolved to the profile of the game actor last seen
		// under it (resolveEntity), at every sighting of a name alone: the
		// NPC's actor profiles were read one by one, about 1 ms a sighting
		// for an NPC that knew 2,500 actors by id. An index of their
		// lowered names finds them. On SQLite it indexes a column that
		// triggers keep (name_key), written when a name changes: an index
		// of the expression would be written again at every sighting
		// that carries the name, changed or not.
		Component: "character", Version: 12, Name: "actors found by name through an index",
		SQLite: func(tx *gorm.DB) error { return store.Exec(tx, actorNameSQLite...) },
		Postgres: func(tx *gorm.DB) error {
			return tx.Exec("CREATE INDEX IF NOT EXISTS idx_profiles_actor_name ON profiles (character_id, LOWER(name)) WHERE " + actorEntity).Error
		},
	}}
}

// actorEntity selects the profiles of game actors (keys made by ActorKey),
// as the partial indexes of migration character v12 say it.
const actorEntity = "entity LIKE '" + actorKeyPrefix + "%'"

// actorNameSQLite are the statements of migration character v12 on
// SQLite: name_key is the lowered name of an actor's profile (NULL for a
// profile keyed by a name), set by the triggers when a profile is made or
// its name or key changes, never by a sighting that leaves them.
var actorNameSQLite = []string{
	"ALTER TABLE profiles ADD COLUMN name_key TEXT",
	"UPDATE profiles SET name_key = LOWER(name) WHERE " + actorEntity,
	"CREATE INDEX IF NOT EXISTS idx_profiles_actor_name ON profiles (character_id, name_key) WHERE name_key IS NOT NULL",
	"CREATE TRIGGER IF NOT EXISTS profile_name_key_insert AFTER INSERT ON profiles WHEN NEW." + actorEntity +
		" BEGIN UPDATE profiles SET name_key = LOWER(NEW.name) WHERE id = NEW.id; END",
	"CREATE TRIGGER IF NOT EXISTS profile_name_key_update AFTER UPDATE OF name, entity ON profiles" +
		" WHEN OLD.name IS NOT NEW.name OR OLD.entity IS NOT NEW.entity" +
		" BEGIN UPDATE profiles SET name_key = CASE WHEN NEW." + actorEntity + " THEN LOWER(NEW.name) END WHERE id = NEW.id; END",
}

// actorNamed is the condition that selects NPC id's profiles of game actors
// under a lowered name (or, with in, any of a list of them), bound after
// the NPC: on SQLite through name_key, on PostgreSQL through the index of
// lowered names (migration character v12).
func actorNamed(sqlite, in bool) string {
	q := "character_id = ? AND name_key"
	if !sqlite {
		q = "character_id = ? AND " + actorEntity + " AND LOWER(name)"
	}
	if in {
		return q + " IN ?"
	}
	return q + " = ?"
}

// profileShown is the condition, on SQLite, under which an update of a
// profile changes what a tick shows of it (tick's profile lines): its
// name, kind, description or feelings, or the day of its last sighting
// (a time SQLite cannot read counts as a change).
const profileShown = `OLD.entity IS NOT NEW.entity OR OLD.name IS NOT NEW.name OR OLD.kind IS NOT NEW.kind
	OR OLD.description IS NOT NEW.description OR OLD.relationship IS NOT NEW.relationship
	OR (OLD.last_seen IS NOT NEW.last_seen AND (date(OLD.last_seen) IS NOT date(NEW.last_seen) OR date(NEW.last_seen) IS NULL))`

// bumpProfileRev is the statement of the SQLite triggers, for the NPC of
// the row NPC (NEW or OLD).
func bumpProfileRev(row string) string {
	return "INSERT INTO profile_revs (character_id, rev) VALUES (" + row + ".character_id, 1) " +
		"ON CONFLICT (character_id) DO UPDATE SET rev = profile_revs.rev + 1;"
}

// profileRevSQLite are the table and triggers of migration character v10
// on SQLite. A row is never deleted: the revision of an NPC deleted and
// created again goes on from where it was.
var profileRevSQLite = []string{
	"CREATE TABLE IF NOT EXISTS profile_revs (character_id VARCHAR(64) PRIMARY KEY, rev BIGINT NOT NULL)",
	"CREATE TRIGGER IF NOT EXISTS profile_rev_profile_insert AFTER INSERT ON profiles BEGIN " + bumpProfileRev("NEW") + " END",
	"CREATE TRIGGER IF NOT EXISTS profile_rev_profile_delete AFTER DELETE ON profiles BEGIN " + bumpProfileRev("OLD") + " END",
	"CREATE TRIGGER IF NOT EXISTS profile_rev_profile_update AFTER UPDATE ON profiles WHEN " + profileShown + " BEGIN " + bumpProfileRev("NEW") + " END",
	"CREATE TRIGGER IF NOT EXISTS profile_rev_fact_insert AFTER INSERT ON facts BEGIN " + bumpProfileRev("NEW") + " END",
	"CREATE TRIGGER IF NOT EXISTS profile_rev_fact_delete AFTER DELETE ON facts BEGIN " + bumpProfileRev("OLD") + " END",
	"CREATE TRIGGER IF NOT EXISTS profile_rev_fact_update AFTER UPDATE ON facts BEGIN " + bumpProfileRev("NEW") + " END",
}

// leanIndexes are the statements of migration character v8 (the same on
// SQLite and PostgreSQL).
var leanIndexes = []string{
	"DROP INDEX IF EXISTS idx_messages_tool_call_id",
	"DROP INDEX IF EXISTS idx_messages_compaction_id",
	"CREATE INDEX idx_messages_compaction_id ON messages (compaction_id) WHERE compaction_id IS NOT NULL",
	"DROP INDEX IF EXISTS idx_events_char_pending",
	"CREATE INDEX idx_events_char_pending ON events (character_id, seq) WHERE consumed_at IS NULL",
	"DROP INDEX IF EXISTS idx_outcomes_char_key",
	"CREATE UNIQUE INDEX idx_outcomes_char_key ON tick_outcomes (character_id, key) WHERE key IS NOT NULL",
}

func (s *Store) q(ctx context.Context) *gorm.DB { return s.db.WithContext(ctx) }

// r is the handle of the hot reads, whose statements have a fixed shape: a
// tick's and an event post's. Outside a transaction their statements stay
// prepared, since parsing one costs about as much as running it.
func (s *Store) r(ctx context.Context) *gorm.DB {
	if s.hot != nil {
		return s.hot.WithContext(ctx)
	}
	return s.q(ctx)
}

// Get loads one NPC, or returns ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*Character, error) {
	var c Character
	err := s.r(ctx).Where("id = ?", id).Take(&c).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("load npc %q: %w", id, err)
	}
	return &c, nil
}

// Intake reads what an event post needs of NPC id, not its whole row: its
// id, its name (who the events may not name) and its auto-tick settings.
func (s *Store) Intake(ctx context.Context, id string) (*Character, error) {
	if stmt := store.Stmt(ctx, s.hot, intakeSQL); stmt != nil {
		c := &Character{ID: id}
		var on sql.NullBool
		var debounce, wait sql.NullInt64
		err := stmt.QueryRowContext(ctx, id).Scan(&c.Name, &on, &debounce, &wait)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
		}
		if err != nil {
			return nil, fmt.Errorf("load npc %q: %w", id, err)
		}
		c.AutoTick = AutoTickSettings{Enabled: on.Bool, DebounceMS: int(debounce.Int64), MaxWaitMS: int(wait.Int64)}
		return c, nil
	}
	var cs []Character
	err := s.r(ctx).Select("id", "name", "auto_tick_enabled", "auto_tick_debounce_ms", "auto_tick_max_wait_ms").
		Where("id = ?", id).Limit(1).Find(&cs).Error
	if err != nil {
		return nil, fmt.Errorf("load npc %q: %w", id, err)
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
	}
	return &cs[0], nil
}

// intakeSQL is Intake's statement (SQLite), kept prepared on the hot handle.
const intakeSQL = "SELECT name, auto_tick_enabled, auto_tick_debounce_ms, auto_tick_max_wait_ms FROM characters WHERE id = ?"

// List returns every NPC ordered by id.
func (s *Store) List(ctx context.Context) ([]Character, error) {
	var cs []Character
	if err := s.q(ctx).Order("id").Find(&cs).Error; err != nil {
		return nil, fmt.Errorf("list npcs: %w", err)
	}
	return cs, nil
}

// IDs returns every NPC id ordered.
func (s *Store) IDs(ctx context.Context) ([]string, error) {
	var ids []string
	if err := s.q(ctx).Model(&Character{}).Order("id").Pluck("id", &ids).Error; err != nil {
		return nil, fmt.Errorf("list npc ids: %w", err)
	}
	return ids, nil
}

// settingsColumns are the columns a PUT replaces; the NPC's state and memory
// are kept.
var settingsColumns = []string{
	"name", "persona", "model", "context_window", "max_output_tokens", "max_steps",
	"compaction_sleep_threshold", "compaction_emergency_threshold",
	"compaction_preserve_recent_messages", "compaction_preserve_ratio", "compaction_target",
	"masking_enabled", "masking_keep_recent_turns", "masking_exempt_tools", "masking_offload_bytes",
	"sleep_cron", "sleep_timezone", "tools", "system_tokens", "tool_tokens", "updated_at",
	"scope", "auto_tick_enabled", "auto_tick_debounce_ms", "auto_tick_max_wait_ms",
}

// Put creates c or replaces the settings of an existing NPC with the same id,
// keeping its history, journal and memories. c.State.SystemTokens and
// ToolTokens must already be measured. It reports whether c was created.
func (s *Store) Put(ctx context.Context, c *Character) (created bool, err error) {
	err = s.atomically(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&Character{}).Where("id = ?", c.ID).Count(&n).Error; err != nil {
			return err
		}
		now := time.Now().UTC()
		c.UpdatedAt = now
		if n == 0 {
			created = true
			c.CreatedAt = now
			return tx.Create(c).Error
		}
		// With c as the model, the update time gorm writes is also the one
		// c carries back.
		return tx.Model(c).Where("id = ?", c.ID).Select(settingsColumns).Updates(c).Error
	})
	if err != nil {
		return false, fmt.Errorf("put npc %q: %w", c.ID, err)
	}
	return created, nil
}

// Delete removes an NPC and every row this package keeps for it.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.atomically(ctx, func(tx *gorm.DB) error {
		res := tx.Where("id = ?", id).Delete(&Character{})
		if res.Error != nil {
			return fmt.Errorf("delete npc %q: %w", id, res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
		}
		for _, m := range []any{&Message{}, &Event{}, &Profile{}, &Fact{}, &TickRecord{}, &TickOutcome{}} {
			if err := tx.Where("character_id = ?", id).Delete(m).Error; err != nil {
				return fmt.Errorf("delete npc %q: %w", id, err)
			}
		}
		return nil
	})
}

// Still checks, inside the caller's write transaction, that NPC c is still
// the NPC it was when c was loaded: neither deleted nor deleted and created
// again under the same id (its CreatedAt tells one life from the next). A
// writer that ran part of its work outside the NPC's lock (a sleep's
// consolidation, a summary) calls it before writing, so nothing it made
// lands on a deleted NPC or on its successor. On PostgreSQL the row is
// share-locked, so a concurrent delete waits for the caller's commit; on
// SQLite the write transaction already excludes it.
func (s *Store) Still(ctx context.Context, c *Character) error {
	born, err := s.lockRow(ctx, c.ID)
	if err != nil {
		return err
	}
	if !born.Equal(c.CreatedAt) {
		return fmt.Errorf("%w: npc %q was deleted and created again", ErrNotFound, c.ID)
	}
	return nil
}

// lockRow share-locks NPC id's row for the rest of the transaction and
// returns when the NPC was created, or ErrNotFound.
func (s *Store) lockRow(ctx context.Context, id string) (time.Time, error) {
	if born, ok, err := s.bornPrepared(ctx, id); ok {
		return born, err
	}
	var rows []Character
	err := s.q(ctx).Clauses(clause.Locking{Strength: "SHARE"}).Select("id", "created_at").Where("id = ?", id).Limit(1).Find(&rows).Error
	if err != nil {
		return time.Time{}, fmt.Errorf("load npc %q: %w", id, err)
	}
	if len(rows) == 0 {
		return time.Time{}, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
	}
	return rows[0].CreatedAt, nil
}

// WorldClock returns the latest game time any NPC has perceived: the game's
// clock as npcd knows it, zero before the first tick of any NPC.
//
// The database keeps no index of the NPCs' game times: every tick moves
// one, and its entry in such an index was two pages more to write at
// every commit. The first call reads the clock from the NPCs' rows, and
// the Store then moves it on with the ticks it commits (AdvanceState).
// Ticks another process commits (another daemon sharing a PostgreSQL
// database) are not seen, so the clock may lag behind: fresh reads it
// again from the rows, unless that was done less than clockReread before
// now (npcd's clock, the caller's), when it is the clock as known. A
// caller about to refuse an event dated too far ahead of the clock asks
// for it fresh first. A tick whose transaction rolled back may have moved
// the clock on all the same: the events it perceived wait to be perceived
// again, and were within the check themselves.
func (s *Store) WorldClock(ctx context.Context, fresh bool, now time.Time) (time.Time, error) {
	w := s.clock
	w.mu.Lock()
	t, known, last := w.t, w.known, w.fresh
	w.mu.Unlock()
	if known && (!fresh || !last.IsZero() && now.Sub(last) < clockReread) {
		return t, nil
	}
	var latest sql.NullTime
	err := s.q(ctx).Model(&Character{}).Select("MAX(game_time)").Row().Scan(store.NullTimeText{T: &latest})
	if err != nil {
		return time.Time{}, fmt.Errorf("world clock: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known = true
	if fresh {
		w.fresh = now
	}
	if latest.Valid && latest.Time.After(w.t) {
		w.t = latest.Time.UTC()
	}
	return w.t, nil
}

// clockReread is how often at most WorldClock reads the NPCs' rows for a
// fresh clock: events dated too far ahead, posted again and again, read
// them once in that time.
const clockReread = time.Second

// worldClock is the world's clock as a Store knows it: the latest game
// time it read from the NPCs' rows or wrote into one; whether it read
// them yet, and when it last did for a fresh clock.
type worldClock struct {
	mu    sync.Mutex
	t     time.Time
	known bool
	fresh time.Time
}

// advance moves the clock on to t, if t is later.
func (w *worldClock) advance(t time.Time) {
	w.mu.Lock()
	if t.After(w.t) {
		w.t = t.UTC()
	}
	w.mu.Unlock()
}

// UpdateState writes the given state columns of an NPC (see State's column
// names). Token totals are changed only by the history methods.
func (s *Store) UpdateState(ctx context.Context, id string, cols map[string]any) error {
	// UpdateColumns leaves updated_at alone: it dates the settings, and
	// caches keyed on it (the compiled tool set) must not miss every tick.
	if err := s.q(ctx).Model(&Character{}).Where("id = ?", id).UpdateColumns(cols).Error; err != nil {
		return fmt.Errorf("update npc %q: %w", id, err)
	}
	return nil
}

// UpdateStateReturning is UpdateState that also returns the NPC's state as
// the write leaves it, read by the same statement (UPDATE … RETURNING), so
// a caller never reads the row again after writing it.
func (s *Store) UpdateStateReturning(ctx context.Context, id string, cols map[string]any) (State, error) {
	if st, ok, err := s.updateStatePrepared(ctx, id, cols); ok {
		return st, err
	}
	return s.updateStateGorm(ctx, id, cols)
}

// updateStateGorm is UpdateStateReturning the ordinary way, through gorm.
func (s *Store) updateStateGorm(ctx context.Context, id string, cols map[string]any) (State, error) {
	var rows []Character
	res := s.q(ctx).Model(&rows).Clauses(clause.Returning{Columns: stateColumns}).Where("id = ?", id).UpdateColumns(cols)
	if res.Error != nil {
		return State{}, fmt.Errorf("update npc %q: %w", id, res.Error)
	}
	if len(rows) == 0 {
		return State{}, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
	}
	return rows[0].State, nil
}

// updateStatePrepared is UpdateStateReturning through a prepared statement
// inside an SQLite transaction, as advance runs AdvanceState's: a
// compaction's commit writes the NPC's row with it while it holds the
// database's only writer, and gorm's way (reflection over the row, the
// statement parsed anew) cost it a tenth of that hold. The columns are
// written in name order, each value bound as it is (what gorm binds too),
// a clause.Expr as its SQL with its values bound. ok is false, and nothing
// was written, when no statement could be used: outside a transaction, on
// PostgreSQL, a column name, an expression or a subquery it does not write, or more
// shapes of statement than it keeps (stateTexts).
func (s *Store) updateStatePrepared(ctx context.Context, id string, cols map[string]any) (st State, ok bool, err error) {
	if !s.preparesState() || len(cols) == 0 || len(cols) > 24 {
		return State{}, false, nil
	}
	var kb [24]string
	keys := kb[:0]
	for k := range cols {
		if !plainColumn(k) {
			return State{}, false, nil
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var tb [512]byte
	b := append(tb[:0], "UPDATE `characters` SET "...)
	args := make([]any, 0, len(keys)+6)
	for i, k := range keys {
		b = assignTo(b, i, k)
		switch v := cols[k].(type) {
		case clause.Expr:
			if strings.Count(v.SQL, "?") != len(v.Vars) || strings.ContainsAny(v.SQL, "@;") {
				return State{}, false, nil
			}
			for _, x := range v.Vars {
				if _, isExpr := x.(clause.Expression); isExpr {
					return State{}, false, nil
				}
			}
			b = append(b, v.SQL...)
			args = append(args, v.Vars...)
		case clause.Expression, *gorm.DB: // other expressions, subqueries: gorm writes them
			return State{}, false, nil
		default:
			b = append(b, '?')
			args = append(args, v)
		}
	}
	return s.runStateUpdate(ctx, id, b, args)
}

// runStateUpdate ends b, an UPDATE of the characters table up to the end
// of its SET list, whose values are args, with NPC id's row and the
// state's columns returned, and runs it through a prepared statement of
// the transaction. ok is false, and nothing was written, when no
// statement could be prepared (more shapes than stateTexts keeps).
func (s *Store) runStateUpdate(ctx context.Context, id string, b []byte, args []any) (st State, ok bool, err error) {
	b = append(b, " WHERE id = ? RETURNING "...)
	b = append(b, stateReturning...)
	text := stateText(b)
	if text == "" {
		return State{}, false, nil
	}
	stmt, ok := s.prep.Stmt(ctx, s.db, text)
	if !ok {
		return State{}, false, nil
	}
	st, err = scanState(stmt.QueryRowContext(ctx, append(args, id)...), id)
	return st, true, err
}

// preparesState reports whether s writes the NPC's row through prepared
// statements (advance, updateStatePrepared): inside an SQLite transaction.
// Elsewhere they go to gorm at once, without building a text first.
func (s *Store) preparesState() bool { return s.inTx && s.prep != nil && store.IsSQLite(s.db) }

// assignTo appends to b, an UPDATE's SET list holding i columns, the
// start of the assignment of column k: "`k`=", after a comma but for the
// first.
func assignTo(b []byte, i int, k string) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, '`')
	b = append(b, k...)
	return append(b, "`="...)
}

// plainColumn reports whether k can be written into a statement as a
// column name: lower-case letters, digits and underscores.
func plainColumn(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// scanState reads the state an UPDATE … RETURNING stateReturning of NPC id
// returned, or ErrNotFound when it updated no row.
func scanState(row *sql.Row, id string) (State, error) {
	var out State
	var note sql.NullString
	err := row.Scan(&out.Tick, &out.Turn, &out.LiveTokens, &out.SummaryTokens,
		&out.LiveMessages, &out.ArchivedMessages, &out.SystemTokens, &out.ToolTokens, &out.Compactions, &out.Awaiting,
		&out.Resume, store.TimeText{T: &out.GameTime}, store.TimePtrText{T: &out.LastSleepAt}, &out.SleepMark, &out.HistoryRev, &note)
	if errors.Is(err, sql.ErrNoRows) {
		return State{}, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
	}
	if err != nil {
		return State{}, fmt.Errorf("update npc %q: %w", id, err)
	}
	out.CompactionNote = note.String
	return out, nil
}

// advance is UpdateStateReturning of AdvanceState's columns (see
// advanceSet) through a prepared statement inside an SQLite transaction.
// Its text, the columns in name order, is built in a stack buffer and
// kept per shape, so a tick allocates no map, expression or text for it.
func (s *Store) advance(ctx context.Context, id string, cols map[string]any, d HistoryDelta, held, next, other int64) (State, error) {
	if !s.preparesState() {
		return s.updateStateGorm(ctx, id, advanceSet(cols, d, held, next, other))
	}
	var kb [24]string
	keys := kb[:0]
	for k := range cols {
		if !d.Zero() && deltaColumn(k) {
			continue
		}
		keys = append(keys, k)
	}
	if !d.Zero() {
		keys = append(keys, "history_rev", "live_messages", "live_tokens", "summary_tokens")
	}
	slices.Sort(keys)
	var tb [512]byte
	b := append(tb[:0], "UPDATE `characters` SET "...)
	args := make([]any, 0, len(keys)+6)
	for i, k := range keys {
		b = assignTo(b, i, k)
		switch {
		case d.Zero() || !deltaColumn(k):
			b = append(b, '?')
			args = append(args, cols[k])
		case k == "history_rev":
			b = append(b, historyRevSQL...)
			args = append(args, held, next, other)
		case k == "live_tokens":
			b = append(b, "live_tokens + ?"...)
			args = append(args, d.LiveTokens)
		case k == "summary_tokens":
			b = append(b, "summary_tokens + ?"...)
			args = append(args, d.SummaryTokens)
		default: // live_messages
			b = append(b, "live_messages + ?"...)
			args = append(args, d.LiveMessages)
		}
	}
	if st, ok, err := s.runStateUpdate(ctx, id, b, args); ok {
		return st, err
	}
	return s.updateStateGorm(ctx, id, advanceSet(cols, d, held, next, other))
}

// historyRevSQL moves the history revision to the first of two fresh
// values when it was held, else to the second.
const historyRevSQL = "CASE WHEN history_rev = ? THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END"

// deltaColumn reports whether AdvanceState computes column k from its
// HistoryDelta when that holds any message.
func deltaColumn(k string) bool {
	switch k {
	case "history_rev", "live_messages", "live_tokens", "summary_tokens":
		return true
	}
	return false
}

// advanceSet is what advance writes, as UpdateStateReturning takes it: cols
// and, when d holds any message, d added to the running totals and the
// history revision moved to next when it was held, else to other.
func advanceSet(cols map[string]any, d HistoryDelta, held, next, other int64) map[string]any {
	set := make(map[string]any, len(cols)+4)
	for k, v := range cols {
		set[k] = v
	}
	if !d.Zero() {
		set["live_tokens"] = gorm.Expr("live_tokens + ?", d.LiveTokens)
		set["summary_tokens"] = gorm.Expr("summary_tokens + ?", d.SummaryTokens)
		set["live_messages"] = gorm.Expr("live_messages + ?", d.LiveMessages)
		set["history_rev"] = gorm.Expr(historyRevSQL, held, next, other)
	}
	return set
}

// stateTexts holds the statement texts advance and updateStatePrepared
// have built, one per shape, up to maxStateTexts.
var stateTexts struct {
	sync.Mutex
	m map[string]string
}

// maxStateTexts bounds stateTexts: the callers write a few shapes each, and
// a statement of a shape past the bound runs the ordinary way.
const maxStateTexts = 256

// stateText returns b as a string, the same one each time for the same
// text, allocating only the first time; "" once stateTexts is full and b
// is not in it.
func stateText(b []byte) string {
	stateTexts.Lock()
	defer stateTexts.Unlock()
	if t, ok := stateTexts.m[string(b)]; ok {
		return t
	}
	if stateTexts.m == nil {
		stateTexts.m = map[string]string{}
	}
	if len(stateTexts.m) >= maxStateTexts {
		return ""
	}
	t := string(b)
	stateTexts.m[t] = t
	return t
}

// stateList is State's columns in the order advance scans them.
var stateList = func() string {
	var names []string
	for _, c := range stateColumns {
		names = append(names, c.Name)
	}
	want := "tick,turn,live_tokens,summary_tokens,live_messages,archived_messages,system_tokens,tool_tokens,compactions," +
		"awaiting,resume,game_time,last_sleep_at,sleep_mark,history_rev,compaction_note"
	if got := strings.Join(names, ","); got != want {
		panic("character: State's columns changed; update advance: " + got)
	}
	return want
}()

// stateReturning is stateList with its time columns read as text (see
// store.TimeText).
var stateReturning = store.TimesAsText(stateList, "game_time", "last_sleep_at")

// stateColumns are State's columns.
var stateColumns = func() []clause.Column {
	var cols []clause.Column
	t := reflect.TypeFor[State]()
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("gorm")
		name, ok := strings.CutPrefix(tag, "column:")
		if !ok {
			panic("character: State field " + t.Field(i).Name + " names no column")
		}
		name, _, _ = strings.Cut(name, ";")
		cols = append(cols, clause.Column{Name: name})
	}
	return cols
}()

// updateReturning writes cols of NPC id and returns the row as written, or
// ErrNotFound.
func updateReturning(db *gorm.DB, id string, cols map[string]any) (*Character, error) {
	var rows []Character
	res := db.Model(&rows).Clauses(clause.Returning{}).Where("id = ?", id).UpdateColumns(cols)
	if res.Error != nil {
		return nil, fmt.Errorf("update npc %q: %w", id, res.Error)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
	}
	return &rows[0], nil
}

// AddEvents stores events for an NPC. Events whose Ref was seen before (even
// long consumed) are counted as duplicates and not stored again. When the
// new events would take the NPC past maxPending unconsumed events the call
// fails with ErrInboxFull and stores nothing: the game learns at once that
// the NPC is not keeping up, and nothing it was told was accepted is ever
// dropped. Duplicates take no room, so a game retrying a post whose answer
// it lost is told they are duplicates even when the inbox is full. An NPC
// that does not exist (or was deleted meanwhile) is ErrNotFound.
func (s *Store) AddEvents(ctx context.Context, id string, evs []Event, maxPending int) (accepted, duplicates int, err error) {
	err = s.atomically(ctx, func(tx *gorm.DB) error {
		// Checked in the transaction that inserts, so an event posted while
		// the NPC is deleted is refused rather than left without its NPC.
		// One statement finds the NPC (share-locking its row on
		// PostgreSQL) and counts its pending events.
		var pending int64
		var err error
		if st, ok := s.prep.Stmt(ctx, tx, inboxSQL); ok {
			err = st.QueryRowContext(ctx, id).Scan(&pending)
		} else if store.IsSQLite(tx) {
			err = tx.Raw(inboxSQL, id).Row().Scan(&pending)
		} else {
			err = tx.Raw(inboxSQL+" FOR SHARE", id).Row().Scan(&pending)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("load npc %q: %w", id, err)
		}
		now := time.Now().UTC()
		for i := range evs {
			e := evs[i]
			e.Seq = 0
			e.CharacterID = id
			e.ReceivedAt = now
			e.ConsumedAt = nil
			if e.At.IsZero() {
				e.At = now
			}
			e.At = e.At.UTC()
			stored, prepared, err := s.insertEvent(ctx, tx, &e)
			if err != nil {
				return err
			}
			if !prepared {
				res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&e)
				if res.Error != nil {
					return res.Error
				}
				stored = res.RowsAffected > 0
			}
			if !stored {
				duplicates++
				continue
			}
			accepted++
		}
		// Checked after the inserts, which this error rolls back, because
		// only the insert tells a new ref from a seen one.
		if maxPending > 0 && int(pending)+accepted > maxPending {
			return fmt.Errorf("%w: npc %q has %d pending events (limit %d)", ErrInboxFull, id, pending, maxPending)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrInboxFull) || errors.Is(err, ErrNotFound) {
			return 0, 0, err
		}
		return 0, 0, fmt.Errorf("add events for %q: %w", id, err)
	}
	return accepted, duplicates, nil
}

// Glance is what a tick needs to decide whether an NPC has anything to
// answer, and what an idle tick reports: the NPC's counters, token totals
// and waiting calls, without its settings.
type Glance struct {
	// NPC holds the state, the window, max_output_tokens and the
	// compaction target (which the warnings weigh the context against);
	// its other settings are not read.
	NPC *Character
	// Pending is whether an event waits in the inbox.
	Pending bool
	// Marked is set when the glance read, at its instant, the NPC's newest
	// journal entry's id, NewestEntry, and the revision of its memories,
	// MemoryRev (both 0 before the first): what a search of the NPC's
	// rows needs to know it is up to date (GlanceEvents reads them); and
	// the revision of its profiles, ProfileRev (0 before the first
	// change), which counts every change of what Profiles gives that a
	// tick shows (migration character v10).
	Marked                             bool
	NewestEntry, MemoryRev, ProfileRev int64
}

// Whole reports whether an event waits or a turn resumes, the glance of a
// tick that goes on: NPC then holds the whole state, its creation and its
// update time, as State reads them.
func (g *Glance) Whole() bool { return g.Pending || g.NPC.State.Resume }

// glanceSQL reads a Glance in one statement. It is kept prepared on SQLite
// (store.Stmt on the Store's hot handle), since an idle tick is the commonest request of a
// large world and parsing the statement again would cost as much as
// running it. The columns only a tick that goes on needs are NULL for an
// idle one, which pays for no time value; a CASE has no declared type,
// so SQLite's driver hands them over as text (store.TimeText).
const glanceSQL = `SELECT tick, turn, live_tokens, summary_tokens, live_messages, archived_messages, system_tokens,
	tool_tokens, compactions, awaiting, resume, compaction_note, context_window, max_output_tokens, compaction_target,
	pe.p, CASE WHEN pe.p OR resume THEN game_time END, CASE WHEN pe.p OR resume THEN last_sleep_at END, sleep_mark,
	history_rev, CASE WHEN pe.p OR resume THEN created_at END, CASE WHEN pe.p OR resume THEN updated_at END
	FROM characters, (SELECT EXISTS (SELECT 1 FROM events WHERE character_id = ? AND consumed_at IS NULL) AS p) AS pe
	WHERE id = ?`

// Glance reads NPC id's Glance, or returns ErrNotFound.
func (s *Store) Glance(ctx context.Context, id string) (*Glance, error) {
	c := &Character{ID: id}
	var note sql.NullString
	var pending bool
	var gameTime, created, updated sql.NullTime
	dest := []any{&c.State.Tick, &c.State.Turn, &c.State.LiveTokens, &c.State.SummaryTokens, &c.State.LiveMessages,
		&c.State.ArchivedMessages, &c.State.SystemTokens, &c.State.ToolTokens, &c.State.Compactions, &c.State.Awaiting,
		&c.State.Resume, &note, &c.ContextWindow, &c.MaxOutputTokens, &c.Compaction.Target, &pending,
		store.NullTimeText{T: &gameTime}, store.TimePtrText{T: &c.State.LastSleepAt}, &c.State.SleepMark, &c.State.HistoryRev,
		store.NullTimeText{T: &created}, store.NullTimeText{T: &updated}}
	var err error
	if stmt := store.Stmt(ctx, s.hot, glanceSQL); stmt != nil {
		// On SQLite the read of one row runs in microseconds and never
		// waits on a network; a context that can be cancelled would make
		// database/sql and the driver each start a goroutine to watch it,
		// costing more than the read. A context already done still stops it.
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("glance at npc %q: %w", id, err)
		}
		err = stmt.QueryRowContext(context.WithoutCancel(ctx), id, id).Scan(dest...)
	} else {
		err = s.q(ctx).Raw(glanceSQL, id, id).Row().Scan(dest...)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("glance at npc %q: %w", id, err)
	}
	c.State.CompactionNote = note.String
	g := &Glance{NPC: c, Pending: pending}
	if g.Whole() {
		c.State.GameTime, c.CreatedAt, c.UpdatedAt = gameTime.Time, created.Time, updated.Time
	}
	return g, nil
}

// glanceEventsSQL reads, for GlanceEvents on SQLite, a Glance (glanceSQL
// and the NPC's marks, its event columns NULL) and then a row per pending
// event, oldest first (its glance columns NULL), up to limit events: the
// limit is written in the text, as in pendingEventsSQL. The events are
// read in the order of the index of pending events, which is theirs, and
// the limit counts the glance's row too. Each limit's text is built once
// (glanceEventsTexts): every tick asks for it, and its 1.3 KB were a sixth
// of what a glance allocated.
func glanceEventsSQL(limit int) string {
	if q, ok := glanceEventsTexts.Load(limit); ok {
		return q.(string)
	}
	q := glanceEventsHead + strconv.Itoa(limit+1)
	glanceEventsTexts.Store(limit, q)
	return q
}

// glanceEventsTexts holds glanceEventsSQL's text by limit: a daemon's
// ticks ask for one or a few (tick.Config.MaxEventsPerTick).
var glanceEventsTexts sync.Map

// glanceEventsHead is glanceEventsSQL but the number of its limit.
var glanceEventsHead = strings.Replace(glanceSQL, "\n\tFROM characters,", ",\n\t"+marksColumns+", "+nulls(len(eventColumns))+"\n\tFROM characters,", 1) + `
	UNION ALL SELECT ` + nulls(glanceColumns+marksCount) + `, ` + eventList + `
	FROM events INDEXED BY idx_events_char_pending WHERE character_id = ? AND consumed_at IS NULL
	LIMIT `

// marksColumns read an NPC's marks (Glance.Marked): its newest journal
// entry's id, its memories' revision and its profiles' revision, each
// through its index; marksCount is their number.
const marksColumns = `(SELECT COALESCE(MAX(id), 0) FROM entries WHERE character_id = ?),
	COALESCE((SELECT rev FROM memory_revs WHERE character_id = ?), 0),
	COALESCE((SELECT rev FROM profile_revs WHERE character_id = ?), 0)`

const marksCount = 3

// glanceColumns is how many columns glanceSQL reads, and eventColumns
// the columns of eventList.
const glanceColumns = 22

var eventColumns = strings.Split(eventList, ",")

// nulls returns n NULL columns, separated by commas.
func nulls(n int) string {
	return strings.TrimSuffix(strings.Repeat("NULL,", n), ",")
}

// glanceScan holds what GlanceEvents scans a glance's rows into, pooled:
// taken for every tick, the dozen values were as many objects each time.
type glanceScan struct {
	note                       sql.NullString
	pending                    bool
	gameTime, created, updated sql.NullTime
	e                          Event
	newest, memRev, profRev    int64
	null                       any // the other part's columns, NULL
	dest                       []any
}

var glanceScans = sync.Pool{New: func() any { return new(glanceScan) }}

// put empties sc, so that it holds nothing alive, and pools it.
func (sc *glanceScan) put() {
	clear(sc.dest[:cap(sc.dest)])
	*sc = glanceScan{dest: sc.dest[:0]}
	glanceScans.Put(sc)
}

// GlanceEvents reads NPC id's Glance and, when an event waits, up to limit
// of its pending events, oldest first, as PendingEvents reads them; or
// returns ErrNotFound. A tick that goes on needs both: on SQLite one
// statement reads them, from one snapshot, with the NPC's marks
// (Glance.Marked), which it reads from the journal's tables (entries,
// memory_revs); elsewhere, with a limit below 1, and without those
// tables, Glance and then PendingEvents do, and read no marks.
func (s *Store) GlanceEvents(ctx context.Context, id string, limit int) (*Glance, []Event, error) {
	var stmt *sql.Stmt
	if limit > 0 {
		stmt = store.Stmt(ctx, s.hot, glanceEventsSQL(limit))
	}
	if stmt == nil {
		g, err := s.Glance(ctx, id)
		if err != nil || !g.Pending {
			return g, nil, err
		}
		evs, err := s.PendingEvents(ctx, id, limit)
		if err != nil {
			return nil, nil, err
		}
		return g, evs, nil
	}
	if err := ctx.Err(); err != nil { // see Glance
		return nil, nil, fmt.Errorf("glance at npc %q: %w", id, err)
	}
	rows, err := stmt.QueryContext(context.WithoutCancel(ctx), id, id, id, id, id, id)
	if err != nil {
		return nil, nil, fmt.Errorf("glance at npc %q: %w", id, err)
	}
	defer rows.Close()
	sc := glanceScans.Get().(*glanceScan)
	defer sc.put()
	c := &Character{ID: id}
	dest := append(sc.dest[:0], &c.State.Tick, &c.State.Turn, &c.State.LiveTokens, &c.State.SummaryTokens, &c.State.LiveMessages,
		&c.State.ArchivedMessages, &c.State.SystemTokens, &c.State.ToolTokens, &c.State.Compactions, &c.State.Awaiting,
		&c.State.Resume, &sc.note, &c.ContextWindow, &c.MaxOutputTokens, &c.Compaction.Target, &sc.pending,
		store.NullTimeText{T: &sc.gameTime}, store.TimePtrText{T: &c.State.LastSleepAt}, &c.State.SleepMark, &c.State.HistoryRev,
		store.NullTimeText{T: &sc.created}, store.NullTimeText{T: &sc.updated}, &sc.newest, &sc.memRev, &sc.profRev)
	// The glance's row comes first (UNION ALL keeps the order of its
	// parts; a row in the wrong place fails to scan, its NULLs into
	// numbers).
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("glance at npc %q: %w", id, err)
		}
		return nil, nil, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
	}
	for range eventColumns {
		dest = append(dest, &sc.null)
	}
	sc.dest = dest
	if err := rows.Scan(dest...); err != nil {
		return nil, nil, fmt.Errorf("glance at npc %q: %w", id, err)
	}
	dest = dest[:0]
	for range glanceColumns + marksCount {
		dest = append(dest, &sc.null)
	}
	dest = append(dest, eventDest(&sc.e)...)
	sc.dest = dest
	var evs []Event
	for rows.Next() {
		sc.e = Event{}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, fmt.Errorf("glance at npc %q: %w", id, err)
		}
		evs = append(evs, sc.e)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("glance at npc %q: %w", id, err)
	}
	pending := sc.pending
	c.State.CompactionNote = sc.note.String
	g := &Glance{NPC: c, Pending: pending, Marked: true, NewestEntry: sc.newest, MemoryRev: sc.memRev, ProfileRev: sc.profRev}
	if g.Whole() {
		c.State.GameTime, c.CreatedAt, c.UpdatedAt = sc.gameTime.Time, sc.created.Time, sc.updated.Time
	}
	if !pending {
		return g, nil, nil
	}
	if evs == nil {
		evs = []Event{} // as PendingEvents gives
	}
	return g, evs, nil
}

// stateSQL reads an NPC's whole state and the times that date its settings
// in one statement, kept prepared on SQLite like glanceSQL.
const stateSQL = `SELECT tick, turn, live_tokens, summary_tokens, live_messages, archived_messages, system_tokens,
	tool_tokens, compactions, awaiting, resume, game_time, last_sleep_at, sleep_mark, history_rev, compaction_note,
	created_at, updated_at
	FROM characters WHERE id = ?`

// stateSQLite is stateSQL with its time columns read as text (see
// store.TimeText), for its prepared statement on SQLite.
var stateSQLite = store.TimesAsText(stateSQL, "game_time", "last_sleep_at", "created_at", "updated_at")

// State reads NPC id's whole state, its creation and its update time — not
// its other settings — or returns ErrNotFound. Settings change only with
// the update time (every PUT or PATCH sets it anew) and an NPC deleted and
// created again has another creation time, so a copy of the settings read
// at the same two times is current.
func (s *Store) State(ctx context.Context, id string) (*Character, error) {
	c := &Character{ID: id}
	var note sql.NullString
	var gameTime sql.NullTime
	dest := []any{&c.State.Tick, &c.State.Turn, &c.State.LiveTokens, &c.State.SummaryTokens, &c.State.LiveMessages,
		&c.State.ArchivedMessages, &c.State.SystemTokens, &c.State.ToolTokens, &c.State.Compactions, &c.State.Awaiting,
		&c.State.Resume, store.NullTimeText{T: &gameTime}, store.TimePtrText{T: &c.State.LastSleepAt}, &c.State.SleepMark,
		&c.State.HistoryRev, &note, store.TimeText{T: &c.CreatedAt}, store.TimeText{T: &c.UpdatedAt}}
	var err error
	if stmt := store.Stmt(ctx, s.hot, stateSQLite); stmt != nil {
		err = stmt.QueryRowContext(ctx, id).Scan(dest...)
	} else if stmt, ok := s.prep.Stmt(ctx, s.db, stateSQLite); ok {
		// Inside an SQLite transaction (a compaction's reads the state
		// while it holds the writer).
		err = stmt.QueryRowContext(ctx, id).Scan(dest...)
	} else {
		err = s.q(ctx).Raw(stateSQL, id).Row().Scan(dest...)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("state of npc %q: %w", id, err)
	}
	c.State.CompactionNote = note.String
	c.State.GameTime = gameTime.Time
	return c, nil
}

// Fresh returns NPC c as it is now: its state read afresh with State, its
// settings c's when they are unchanged since c was read (the same creation
// and update times), else the NPC read again whole. It returns ErrNotFound
// if the NPC is gone.
func (s *Store) Fresh(ctx context.Context, c *Character) (*Character, error) {
	st, err := s.State(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	if !st.CreatedAt.Equal(c.CreatedAt) || !st.UpdatedAt.Equal(c.UpdatedAt) {
		return s.Get(ctx, c.ID)
	}
	fresh := *c
	fresh.State = st.State
	return &fresh, nil
}

// PendingEvents returns up to limit unconsumed events, oldest first.
func (s *Store) PendingEvents(ctx context.Context, id string, limit int) ([]Event, error) {
	if limit > 0 {
		if stmt := store.Stmt(ctx, s.hot, pendingEventsSQL(limit)); stmt != nil {
			evs, err := scanEvents(ctx, stmt, id)
			if err != nil {
				return nil, fmt.Errorf("pending events of %q: %w", id, err)
			}
			return evs, nil
		}
	}
	var evs []Event
	err := s.r(ctx).Where("character_id = ? AND consumed_at IS NULL", id).Order("seq").Limit(limit).Find(&evs).Error
	if err != nil {
		return nil, fmt.Errorf("pending events of %q: %w", id, err)
	}
	return evs, nil
}

// eventList is Event's columns in the order scanEvents scans them, its
// times read as text (see store.TimeText; the statements that select it
// are SQLite's).
const eventList = "seq,character_id,ref,kind,actor,actor_id,target,text,room,+at,+received_at,+consumed_at,consumed_tick,message_id"

// pendingEventsSQL reads up to limit pending events of an NPC (SQLite). The
// limit is written in the text, not bound: a tick's limit is the engine's
// setting, so the text stays one and its statement stays prepared, and
// SQLite plans a literal limit once instead of on every run.
func pendingEventsSQL(limit int) string {
	return "SELECT " + eventList + " FROM events WHERE character_id = ? AND consumed_at IS NULL ORDER BY seq LIMIT " + strconv.Itoa(limit)
}

// eventDest returns where the columns of eventList are read into e.
func eventDest(e *Event) []any {
	return []any{&e.Seq, &e.CharacterID, &e.Ref, &e.Kind, &e.Actor, &e.ActorID, &e.Target, &e.Text, &e.Room,
		store.TimeText{T: &e.At}, store.TimeText{T: &e.ReceivedAt}, store.TimePtrText{T: &e.ConsumedAt}, &e.ConsumedTick,
		&e.MessageID}
}

// scanEvents runs the query stmt, which selects eventList, with args.
func scanEvents(ctx context.Context, stmt *sql.Stmt, args ...any) ([]Event, error) {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	evs := []Event{} // as gorm gives: empty, not nil
	for rows.Next() {
		var e Event
		if err := rows.Scan(eventDest(&e)...); err != nil {
			return nil, err
		}
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return evs, rows.Close()
}

// PendingCount returns how many events wait for the NPC.
func (s *Store) PendingCount(ctx context.Context, id string) (int, error) {
	var n int64
	err := s.q(ctx).Model(&Event{}).Where("character_id = ? AND consumed_at IS NULL", id).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count pending events of %q: %w", id, err)
	}
	return int(n), nil
}

// PendingTotal returns how many events wait across all NPCs: the event
// queue's depth.
func (s *Store) PendingTotal(ctx context.Context) (int64, error) {
	var n int64
	if err := s.q(ctx).Model(&Event{}).Where("consumed_at IS NULL").Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count pending events: %w", err)
	}
	return n, nil
}

// NPCsWithPending returns the ids of NPCs that have unconsumed events or
// posted tool results their next tick must continue from, ordered.
func (s *Store) NPCsWithPending(ctx context.Context) ([]string, error) {
	return s.PendingIn(ctx, PendingQuery{})
}

// PendingQuery narrows PendingIn.
type PendingQuery struct {
	Scope    string // only NPCs of this scope; empty: every NPC
	AutoTick bool   // only NPCs with auto-tick enabled
}

// PendingIn is NPCsWithPending limited as pq says.
func (s *Store) PendingIn(ctx context.Context, pq PendingQuery) ([]string, error) {
	var ids, resume []string
	narrow := func(q *gorm.DB) *gorm.DB {
		if pq.Scope != "" {
			q = q.Where("scope = ?", pq.Scope)
		}
		if pq.AutoTick {
			q = q.Where("auto_tick_enabled = ?", true)
		}
		return q
	}
	evq := s.q(ctx).Model(&Event{}).Where("consumed_at IS NULL")
	if pq.Scope != "" || pq.AutoTick {
		evq = evq.Where("character_id IN (?)", narrow(s.q(ctx).Model(&Character{}).Select("id")))
	}
	err := evq.Distinct("character_id").Pluck("character_id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("npcs with pending events: %w", err)
	}
	if err := narrow(s.q(ctx).Model(&Character{}).Where("resume = ?", true)).Pluck("id", &resume).Error; err != nil {
		return nil, fmt.Errorf("npcs with pending results: %w", err)
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(ids)+len(resume))
	for _, id := range append(ids, resume...) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ConsumeEvents marks events as consumed by tick, into message msgID. It
// fails if any of them was already consumed, so an event is consumed by
// exactly one tick.
func (s *Store) ConsumeEvents(ctx context.Context, id string, seqs []int64, tick int64, msgID int64) error {
	if len(seqs) == 0 {
		return nil
	}
	now := time.Now().UTC()
	if s.inTx {
		// The caller's transaction: its prepared statement needs only
		// s.db, and the gorm session that carries ctx is made only for
		// the ordinary way.
		return s.consume(ctx, s.db, false, id, seqs, now, tick, msgID)
	}
	// In a transaction so that a refused call leaves the events it could
	// have consumed pending.
	return s.atomically(ctx, func(tx *gorm.DB) error {
		return s.consume(ctx, tx, true, id, seqs, now, tick, msgID)
	})
}

// consume is ConsumeEvents in the transaction tx, which carries ctx for
// gorm's statements when hasCtx.
func (s *Store) consume(ctx context.Context, tx *gorm.DB, hasCtx bool, id string, seqs []int64, now time.Time, tick, msgID int64) error {
	var n int64
	if st, ok := s.prep.Stmt(ctx, tx, consumeSQL(len(seqs))); ok {
		args := make([]any, 0, 4+len(seqs))
		args = append(args, now, tick, msgID, id)
		for _, seq := range seqs {
			args = append(args, seq)
		}
		res, err := st.ExecContext(ctx, args...)
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err != nil {
			return fmt.Errorf("consume events of %q: %w", id, err)
		}
	} else {
		if !hasCtx {
			tx = tx.WithContext(ctx)
		}
		res := tx.Model(&Event{}).
			Where("character_id = ? AND seq IN ? AND consumed_at IS NULL", id, seqs).
			Updates(map[string]any{"consumed_at": now, "consumed_tick": tick, "message_id": msgID})
		if res.Error != nil {
			return fmt.Errorf("consume events of %q: %w", id, res.Error)
		}
		n = res.RowsAffected
	}
	if int(n) != len(seqs) {
		return fmt.Errorf("consume events of %q: %d of %d were already consumed", id, len(seqs)-int(n), len(seqs))
	}
	return nil
}

// consumeSQL is ConsumeEvents' statement for n events (SQLite).
func consumeSQL(n int) string {
	return "UPDATE `events` SET `consumed_at`=?,`consumed_tick`=?,`message_id`=? WHERE character_id = ? AND consumed_at IS NULL AND seq IN (?" +
		strings.Repeat(",?", n-1) + ")"
}

// EventsByRef returns the stored events with the given game refs.
func (s *Store) EventsByRef(ctx context.Context, id string, refs []string) ([]Event, error) {
	var evs []Event
	if len(refs) == 0 {
		return nil, nil
	}
	if err := s.q(ctx).Where("character_id = ? AND ref IN ?", id, refs).Find(&evs).Error; err != nil {
		return nil, fmt.Errorf("events of %q: %w", id, err)
	}
	return evs, nil
}

// AppendMessages inserts msgs as live history of NPC id, measures their
// tokens with c (tool results after insert, since their placeholders name
// their ids) and adds them to the NPC's running totals. Each message's
// CharacterID, State and token fields are set here.
func (s *Store) AppendMessages(ctx context.Context, id string, msgs []*Message, c Counter, offloadBytes int) error {
	d, err := s.InsertMessages(ctx, id, msgs, c, offloadBytes)
	if err != nil || d.Zero() {
		return err
	}
	if err := s.q(ctx).Model(&Character{}).Where("id = ?", id).UpdateColumns(d.Columns()).Error; err != nil {
		return fmt.Errorf("update totals of %q: %w", id, err)
	}
	return nil
}

// measuredSQL stores a tool result's token counts (SQLite).
const measuredSQL = "UPDATE `messages` SET `tokens`=?,`view_tokens`=?,`mask_tokens`=?,`offloaded`=? WHERE id = ?"

// HistoryDelta is what inserted messages add to an NPC's running totals
// (InsertMessages), or archived ones take from them (ArchiveMessages,
// negative then, with ArchivedMessages). Appended is set when any message
// was inserted or archived.
type HistoryDelta struct {
	LiveTokens, SummaryTokens, LiveMessages int
	ArchivedMessages                        int
	Appended                                bool
}

// Zero reports whether no message was inserted or archived.
func (d HistoryDelta) Zero() bool { return !d.Appended }

// Add returns d and e together.
func (d HistoryDelta) Add(e HistoryDelta) HistoryDelta {
	return HistoryDelta{LiveTokens: d.LiveTokens + e.LiveTokens, SummaryTokens: d.SummaryTokens + e.SummaryTokens,
		LiveMessages: d.LiveMessages + e.LiveMessages, ArchivedMessages: d.ArchivedMessages + e.ArchivedMessages,
		Appended: d.Appended || e.Appended}
}

// Columns returns the update of an NPC's row (for UpdateState or
// UpdateStateReturning) that adds d to its running totals and moves its
// history revision on; none when d is zero.
func (d HistoryDelta) Columns() map[string]any {
	if d.Zero() {
		return map[string]any{}
	}
	cols := map[string]any{
		"live_tokens":    gorm.Expr("live_tokens + ?", d.LiveTokens),
		"summary_tokens": gorm.Expr("summary_tokens + ?", d.SummaryTokens),
		"live_messages":  gorm.Expr("live_messages + ?", d.LiveMessages),
		"history_rev":    newRev(),
	}
	if d.ArchivedMessages != 0 {
		cols["archived_messages"] = gorm.Expr("archived_messages + ?", d.ArchivedMessages)
	}
	return cols
}

// ColumnsFrom is Columns for a caller that read the live history at
// revision held: the revision moves to next when it was still held when the
// row is written, else to another fresh value, so that the state the write
// returns tells whether the history read at held, with d's changes, is the
// stored one (its HistoryRev is next). d must not be zero.
func (d HistoryDelta) ColumnsFrom(held int64) (cols map[string]any, next int64) {
	cols = d.Columns()
	next, other := newRevs()
	cols["history_rev"] = gorm.Expr(historyRevSQL, held, next, other)
	return cols, next
}

// InsertMessages is AppendMessages without the update of the NPC's row: it
// returns what the running totals must gain, for the caller to add with
// AdvanceState in the same transaction. Until then the totals and the
// history revision are stale.
func (s *Store) InsertMessages(ctx context.Context, id string, msgs []*Message, c Counter, offloadBytes int) (HistoryDelta, error) {
	return s.insertMeasuring(ctx, id, msgs, c, offloadBytes, false)
}

// InsertMeasured is InsertMessages for messages the caller measured before
// its transaction (Measure, with c and offloadBytes), tool results aside:
// their placeholders name their ids, which only the insert tells, so they
// are measured here as InsertMessages measures them. The others are stored
// with the counts they hold. A transaction that holds SQLite's only write
// lock then spends none of it counting tokens.
func (s *Store) InsertMeasured(ctx context.Context, id string, msgs []*Message, c Counter, offloadBytes int) (HistoryDelta, error) {
	return s.insertMeasuring(ctx, id, msgs, c, offloadBytes, true)
}

// insertMeasuring is InsertMessages, or InsertMeasured when measured is set.
func (s *Store) insertMeasuring(ctx context.Context, id string, msgs []*Message, c Counter, offloadBytes int, measured bool) (HistoryDelta, error) {
	if len(msgs) == 0 {
		return HistoryDelta{}, nil
	}
	// The prepared statements need only the transaction s.db holds; the
	// gorm session that carries ctx is made only for the ordinary way.
	db := s.db
	// guess is the id msgs[0] is expected to get; the others follow it.
	guess := s.nextMsg.Load()
	for i, m := range msgs {
		m.CharacterID = id
		m.State = StateLive
		if m.CreatedAt.IsZero() {
			m.CreatedAt = time.Now().UTC()
		}
		m.ID = 0
		if m.Role == "tool" {
			// A tool result's placeholders name its id.
			if guess <= 0 {
				continue // measured below, once its id is known
			}
			m.ID = guess + int64(i)
		} else if measured {
			continue
		}
		Measure(m, c, offloadBytes)
		m.ID = 0
	}
	if done, err := s.insertMessages(ctx, db, msgs); err != nil {
		return HistoryDelta{}, fmt.Errorf("append messages of %q: %w", id, err)
	} else if !done {
		if err := s.q(ctx).CreateInBatches(msgs, 100).Error; err != nil {
			return HistoryDelta{}, fmt.Errorf("append messages of %q: %w", id, err)
		}
	}
	if last := msgs[len(msgs)-1].ID; last > 0 {
		s.nextMsg.Store(last + 1)
	}
	d := HistoryDelta{Appended: true}
	for i, m := range msgs {
		if m.Role == "tool" && (guess <= 0 || m.ID != guess+int64(i)) {
			// Measured with another id than it got.
			Measure(m, c, offloadBytes)
			var err error
			if st, ok := s.prep.Stmt(ctx, db, measuredSQL); ok {
				_, err = st.ExecContext(ctx, m.Tokens, m.ViewTokens, m.MaskTokens, m.Offloaded, m.ID)
			} else {
				err = s.q(ctx).Model(&Message{}).Where("id = ?", m.ID).Updates(map[string]any{
					"tokens": m.Tokens, "view_tokens": m.ViewTokens, "mask_tokens": m.MaskTokens, "offloaded": m.Offloaded,
				}).Error
			}
			if err != nil {
				return HistoryDelta{}, fmt.Errorf("append messages of %q: %w", id, err)
			}
		}
		if m.Summary {
			d.SummaryTokens += m.PromptTokens()
			continue
		}
		d.LiveTokens += m.PromptTokens()
		d.LiveMessages++
	}
	return d, nil
}

// AdvanceState writes the given state columns of NPC id, adds d (messages
// just inserted by InsertMessages) to its running totals and, when d
// holds any, moves its history revision on — all in one statement (UPDATE
// … RETURNING) — and returns the state as written. held reports whether
// the revision was held before the write: the live history a caller read at
// revision held is then, with what d inserted, exactly the stored one. An
// NPC that does not exist is ErrNotFound.
func (s *Store) AdvanceState(ctx context.Context, id string, cols map[string]any, d HistoryDelta, held int64) (State, bool, error) {
	next, other := newRev(), int64(0)
	if !d.Zero() {
		// Fresh either way; which one says whether held was current.
		next, other = newRevs()
	}
	st, err := s.advance(ctx, id, cols, d, held, next, other)
	if err != nil {
		return State{}, false, err
	}
	s.clock.advance(st.GameTime)
	if d.Zero() {
		return st, st.HistoryRev == held, nil
	}
	return st, st.HistoryRev == next, nil
}

// HistoryRev returns the NPC's history revision (see State.HistoryRev).
func (s *Store) HistoryRev(ctx context.Context, id string) (int64, error) {
	var revs []int64
	if err := s.q(ctx).Model(&Character{}).Where("id = ?", id).Pluck("history_rev", &revs).Error; err != nil {
		return 0, fmt.Errorf("history revision of %q: %w", id, err)
	}
	if len(revs) == 0 {
		return 0, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
	}
	return revs[0], nil
}

// LiveMessages returns the live history as it is sent: the summary first,
// then every other live message oldest first.
func (s *Store) LiveMessages(ctx context.Context, id string) ([]Message, error) {
	// Scanned by hand, not by gorm's reflection: a sleep's plan and a
	// cold tick read the whole live history.
	var (
		rows *sql.Rows
		err  error
	)
	if stmt := store.Stmt(ctx, s.hot, liveMessagesSQL); stmt != nil {
		rows, err = stmt.QueryContext(ctx, id, StateLive)
	} else {
		rows, err = s.q(ctx).Raw(liveMessagesSQL, id, StateLive).Rows()
	}
	if err != nil {
		return nil, fmt.Errorf("live history of %q: %w", id, err)
	}
	defer rows.Close()
	ms := make([]Message, 0, 20)
	var scratch messageScratch
	for rows.Next() {
		ms = append(ms, Message{})
		m := &ms[len(ms)-1]
		if err := scanMessage(rows, m, &scratch); err != nil {
			return nil, fmt.Errorf("live history of %q: %w", id, err)
		}
		// A live history is held between ticks (the tick's history cache):
		// the NPC, the state and the role every row repeats are the
		// strings of the query and of the package, not three of each
		// row's own for the collector to trace.
		m.CharacterID, m.State = sameAs(m.CharacterID, id), sameAs(m.State, StateLive)
		m.Role = sameAs(m.Role, llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleSystem)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("live history of %q: %w", id, err)
	}
	return ms, nil
}

// sameAs returns the string of common equal to s, else s.
func sameAs(s string, common ...string) string {
	for _, c := range common {
		if s == c {
			return c
		}
	}
	return s
}

// liveMessagesSQL reads an NPC's live history, summary first, every column
// of Message in the order scanMessage scans them.
var liveMessagesSQL = "SELECT id, " + strings.Join(messageColumns, ", ") +
	" FROM messages WHERE character_id = ? AND state = ? ORDER BY summary DESC, id"

// messageScratch holds the nullable columns of a row while scanMessage
// reads it: one per read of many rows, instead of each row's own, which
// escape to the heap through rows.Scan. Every Scan sets each of them, a
// NULL included.
type messageScratch struct {
	characterID, state, role, content, name, toolCallID, toolName sql.NullString
	turn, tick, tokens, viewTokens, maskTokens                    sql.NullInt64
	summary, masked, offloaded                                    sql.NullBool
	gameTime, createdAt                                           sql.NullTime
}

// scanMessage scans a row of id and messageColumns into m; a NULL is read
// as the zero value, as gorm reads it.
func scanMessage(rows *sql.Rows, m *Message, s *messageScratch) error {
	err := rows.Scan(&m.ID, &s.characterID, &s.state, &s.role, &s.summary, &s.content, &s.name, &m.ToolCalls, &s.toolCallID, &s.toolName,
		&s.turn, &s.tick, &s.tokens, &s.viewTokens, &s.maskTokens, &s.masked, &s.offloaded, &m.CompactionID, &m.EventRefs, &m.Metadata,
		&s.gameTime, &s.createdAt)
	if err != nil {
		return err
	}
	m.CharacterID, m.State, m.Role, m.Content, m.Name = s.characterID.String, s.state.String, s.role.String, s.content.String, s.name.String
	m.ToolCallID, m.ToolName = s.toolCallID.String, s.toolName.String
	m.Turn, m.Tick, m.Tokens, m.ViewTokens, m.MaskTokens = s.turn.Int64, s.tick.Int64, int(s.tokens.Int64), int(s.viewTokens.Int64), int(s.maskTokens.Int64)
	m.Summary, m.Masked, m.Offloaded = s.summary.Bool, s.masked.Bool, s.offloaded.Bool
	m.GameTime, m.CreatedAt = s.gameTime.Time, s.createdAt.Time
	return nil
}

// HistoryQuery selects messages for inspection.
type HistoryQuery struct {
	State  string // live, archived or "" / "all"
	Before int64  // only ids below this; 0 for no bound
	After  int64  // only ids above this; 0 for no bound
	Turn   int64  // only this turn; 0 for all
	Limit  int    // newest Limit rows (returned oldest first); 0 for all
}

// History returns messages of an NPC oldest first.
func (s *Store) History(ctx context.Context, id string, hq HistoryQuery) ([]Message, error) {
	q := s.q(ctx).Where("character_id = ?", id)
	switch hq.State {
	case StateLive, StateArchived:
		q = q.Where("state = ?", hq.State)
	}
	if hq.Before > 0 {
		q = q.Where("id < ?", hq.Before)
	}
	if hq.After > 0 {
		q = q.Where("id > ?", hq.After)
	}
	if hq.Turn > 0 {
		q = q.Where("turn = ?", hq.Turn)
	}
	var ms []Message
	if hq.Limit > 0 {
		q = q.Order("id DESC").Limit(hq.Limit)
	} else {
		q = q.Order("id")
	}
	if err := q.Find(&ms).Error; err != nil {
		return nil, fmt.Errorf("history of %q: %w", id, err)
	}
	if hq.Limit > 0 {
		for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
			ms[i], ms[j] = ms[j], ms[i]
		}
	}
	return ms, nil
}

// MessageByID returns one message of an NPC, live or archived.
func (s *Store) MessageByID(ctx context.Context, id string, msgID int64) (*Message, error) {
	var m Message
	err := s.q(ctx).Where("character_id = ? AND id = ?", id, msgID).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("%w: message %d of npc %q", ErrNotFound, msgID, id)
	}
	if err != nil {
		return nil, fmt.Errorf("load message %d of %q: %w", msgID, id, err)
	}
	return &m, nil
}

// MessagesByID returns the given messages of an NPC ordered by id.
func (s *Store) MessagesByID(ctx context.Context, id string, ids []int64) ([]Message, error) {
	var ms []Message
	if len(ids) == 0 {
		return nil, nil
	}
	for start := 0; start < len(ids); start += 500 {
		end := min(start+500, len(ids))
		var part []Message
		if err := s.q(ctx).Where("character_id = ? AND id IN ?", id, ids[start:end]).Order("id").Find(&part).Error; err != nil {
			return nil, fmt.Errorf("load messages of %q: %w", id, err)
		}
		ms = append(ms, part...)
	}
	return ms, nil
}

// CountMessages returns how many messages of the NPC are in each state.
func (s *Store) CountMessages(ctx context.Context, id string) (live, archived int, err error) {
	type row struct {
		State string
		N     int
	}
	var rows []row
	if err := s.q(ctx).Model(&Message{}).Select("state, count(*) AS n").Where("character_id = ?", id).Group("state").Scan(&rows).Error; err != nil {
		return 0, 0, fmt.Errorf("count messages of %q: %w", id, err)
	}
	for _, r := range rows {
		switch r.State {
		case StateLive:
			live = r.N
		case StateArchived:
			archived = r.N
		}
	}
	return live, archived, nil
}

// Masked is what a masking did: the rows it masked, the prompt tokens
// that saved, and the NPC as the masking left it (nil when nothing was
// masked, so the caller's copy still stands).
type Masked struct {
	IDs   []int64
	Saved int
	After *Character
}

// MaskToolResults masks live tool results of turns older than beforeTurn,
// except those of exempt tools, and takes the saving off the running total.
// Only the results whose placeholder is smaller are read (MaskMessages
// would leave the others alone): most often, short results such as "ok",
// none.
func (s *Store) MaskToolResults(ctx context.Context, id string, beforeTurn int64, exempt []string) (Masked, error) {
	q := s.q(ctx).Model(&Message{}).Where("character_id = ? AND state = ? AND role = ? AND masked = ? AND turn < ? AND mask_tokens < view_tokens",
		id, StateLive, "tool", false, beforeTurn)
	if len(exempt) > 0 {
		q = q.Where("tool_name NOT IN ?", exempt)
	}
	var ids []int64
	if err := q.Pluck("id", &ids).Error; err != nil {
		return Masked{}, fmt.Errorf("mask tool results of %q: %w", id, err)
	}
	return s.MaskMessages(ctx, id, ids)
}

// MaskMessages masks the given live, unmasked tool results of an NPC where
// the placeholder is smaller than what is sent now, and takes the saving off
// the running total. Other ids are ignored.
func (s *Store) MaskMessages(ctx context.Context, id string, ids []int64) (Masked, error) {
	db := s.q(ctx)
	var out Masked
	for start := 0; start < len(ids); start += 500 {
		end := min(start+500, len(ids))
		// One statement masks the batch's rows masking shrinks and
		// returns what they saved.
		rows, err := db.Raw(maskSQL, true, id, StateLive, "tool", false, ids[start:end]).Rows()
		if err != nil {
			return Masked{}, fmt.Errorf("mask messages of %q: %w", id, err)
		}
		if err := maskedRows(rows, &out); err != nil {
			return Masked{}, fmt.Errorf("mask messages of %q: %w", id, err)
		}
	}
	slices.Sort(out.IDs)
	if len(out.IDs) > 0 {
		after, err := updateReturning(db, id, map[string]any{
			"live_tokens": gorm.Expr("live_tokens - ?", out.Saved), "history_rev": newRev(),
		})
		if err != nil {
			return Masked{}, fmt.Errorf("mask messages of %q: %w", id, err)
		}
		out.After = after
	}
	return out, nil
}

// maskSQL masks the live, unmasked tool results of an NPC among the ids
// given whose placeholder is smaller than what is sent now, and returns
// what masking saves of each.
const maskSQL = "UPDATE messages SET masked = ? WHERE character_id = ? AND state = ? AND role = ? AND masked = ? AND mask_tokens < view_tokens " +
	"AND id IN ? RETURNING id, view_tokens, mask_tokens"

// maskedRows reads the rows maskSQL returns into out, closing them.
func maskedRows(rows *sql.Rows, out *Masked) error {
	defer rows.Close()
	for rows.Next() {
		var id, view, mask int64
		if err := rows.Scan(&id, &view, &mask); err != nil {
			return err
		}
		out.IDs = append(out.IDs, id)
		out.Saved += int(view - mask)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

// Archive moves live messages of an NPC to the archive, recording the
// compaction that did it, and takes them off the running totals. It fails,
// changing nothing, unless every id names a live message of the NPC: a
// compaction never archives what it did not plan.
func (s *Store) Archive(ctx context.Context, id string, ids []int64, compactionID *int64) error {
	if len(ids) == 0 {
		return nil
	}
	// In a transaction: a span of many batches found stale in a late batch
	// must not stay half archived.
	return s.atomically(ctx, func(db *gorm.DB) error { return s.archive(ctx, db, id, ids, compactionID) })
}

func (s *Store) archive(ctx context.Context, db *gorm.DB, id string, ids []int64, compactionID *int64) error {
	d, err := s.archiveRows(ctx, db, id, ids, compactionID)
	if err != nil {
		return err
	}
	if err := db.Model(&Character{}).Where("id = ?", id).UpdateColumns(d.Columns()).Error; err != nil {
		return fmt.Errorf("archive messages of %q: %w", id, err)
	}
	return nil
}

// ArchiveMessages is Archive without the update of the NPC's row, inside
// the caller's transaction (WithTx): it returns what the running totals
// lose, for the caller to write with the rest of its changes to the row
// (HistoryDelta.Add, HistoryDelta.Columns) in the same transaction. Until
// then the totals and the history revision are stale.
func (s *Store) ArchiveMessages(ctx context.Context, id string, ids []int64, compactionID *int64) (HistoryDelta, error) {
	if !s.inTx {
		return HistoryDelta{}, fmt.Errorf("archive messages of %q: outside a transaction", id)
	}
	if len(ids) == 0 {
		return HistoryDelta{}, nil
	}
	return s.archiveRows(ctx, s.q(ctx), id, ids, compactionID)
}

// archiveRows archives ids (see Archive) and returns what the NPC's
// running totals lose.
func (s *Store) archiveRows(ctx context.Context, db *gorm.DB, id string, ids []int64, compactionID *int64) (HistoryDelta, error) {
	var t archivedTotals
	// In order: a compaction's span lists the previous summary first,
	// newer than the messages after it.
	sorted := ids
	if !slices.IsSorted(ids) {
		sorted = slices.Sorted(slices.Values(ids))
	}
	spanned, err := s.archiveSpan(ctx, db, id, sorted, compactionID, &t)
	if err != nil {
		return HistoryDelta{}, fmt.Errorf("archive messages of %q: %w", id, err)
	}
	for start := 0; !spanned && start < len(ids); start += 500 {
		end := min(start+500, len(ids))
		// One statement archives the batch's live rows and returns what
		// the totals need of them. A row that was not live is left alone
		// and missing from the answer: the caller's transaction, which
		// fails then, undoes the rest.
		// Read by hand, not by gorm's reflection into whole messages: a
		// compaction archives many rows.
		rows, err := db.Raw(archiveSQL, StateArchived, compactionID, id, StateLive, ids[start:end]).Rows()
		if err != nil {
			return HistoryDelta{}, fmt.Errorf("archive messages of %q: %w", id, err)
		}
		n, err := t.read(rows, nil)
		if err != nil {
			return HistoryDelta{}, fmt.Errorf("archive messages of %q: %w", id, err)
		}
		if n != end-start {
			return HistoryDelta{}, fmt.Errorf("archive messages of %q: %w: %d of %d messages are not live", id, ErrInvalid, end-start-n, end-start)
		}
	}
	return HistoryDelta{LiveTokens: -t.live, SummaryTokens: -t.summary, LiveMessages: -t.count, ArchivedMessages: len(ids), Appended: true}, nil
}

// archiveSpan archives ids, sorted, by their range when they are every
// live message of the NPC from the first to the last, as the span of a
// compaction is (the oldest live messages, and the summary of the one
// before), and reports whether it did;
// otherwise it changes nothing. Its two statements keep one text whatever
// the number of ids, so on SQLite they stay prepared (store.TxStmts), where
// the list of archiveSQL is parsed anew for every length: a third of
// archiving a compaction's span.
func (s *Store) archiveSpan(ctx context.Context, db *gorm.DB, id string, ids []int64, compactionID *int64, t *archivedTotals) (bool, error) {
	// (An id given twice is refused either way: the rows returned, each
	// once, fall short of the ids.)
	if len(ids) < 2 || !slices.IsSorted(ids) {
		return false, nil
	}
	lo, hi := ids[0], ids[len(ids)-1]
	var live int
	var err error
	if st, ok := s.prep.Stmt(ctx, db, liveInSpanSQL); ok {
		err = st.QueryRowContext(ctx, id, StateLive, lo, hi).Scan(&live)
	} else {
		err = db.Raw(liveInSpanSQL, id, StateLive, lo, hi).Row().Scan(&live)
	}
	if err != nil || live != len(ids) {
		return false, err
	}
	// As many live rows in the range as ids: they are the ids, unless one
	// of these is not live, which the rows returned tell (the caller's
	// transaction, which fails then, undoes the archiving).
	var rows *sql.Rows
	if st, ok := s.prep.Stmt(ctx, db, archiveSpanSQL); ok {
		rows, err = st.QueryContext(ctx, StateArchived, compactionID, id, StateLive, lo, hi)
	} else {
		rows, err = db.Raw(archiveSpanSQL, StateArchived, compactionID, id, StateLive, lo, hi).Rows()
	}
	if err != nil {
		return false, err
	}
	planned := func(m int64) bool { _, found := slices.BinarySearch(ids, m); return found }
	n, err := t.read(rows, planned)
	if err != nil {
		return false, err
	}
	if n != len(ids) {
		return false, fmt.Errorf("%w: %d of %d messages are not live", ErrInvalid, len(ids)-n, len(ids))
	}
	return true, nil
}

// archiveSQL archives a batch of an NPC's live messages and reads back
// what the running totals need of them.
const archiveSQL = "UPDATE messages SET state = ?, compaction_id = ? WHERE character_id = ? AND state = ? AND id IN ? " +
	"RETURNING id, summary, masked, view_tokens, mask_tokens"

// liveInSpanSQL counts an NPC's live messages in a range of ids, and
// archiveSpanSQL archives them as archiveSQL does.
const (
	liveInSpanSQL  = "SELECT count(*) FROM messages WHERE character_id = ? AND state = ? AND id BETWEEN ? AND ?"
	archiveSpanSQL = "UPDATE messages SET state = ?, compaction_id = ? WHERE character_id = ? AND state = ? AND id BETWEEN ? AND ? " +
		"RETURNING id, summary, masked, view_tokens, mask_tokens"
)

// archivedTotals is what archived messages took in the prompt: summary for
// the summary, live for the others, whose number is count.
type archivedTotals struct{ live, summary, count int }

// read adds to t the rows archiveSQL or archiveSpanSQL returns, closing
// them, and returns their number. With planned set, a row whose id it
// refuses is an error: the statement archived a message it should not
// have.
func (t *archivedTotals) read(rows *sql.Rows, planned func(int64) bool) (int, error) {
	defer rows.Close()
	n := 0
	var (
		msgID                  int64
		isSummary, masked      sql.NullBool
		viewTokens, maskTokens sql.NullInt64
	)
	for rows.Next() {
		if err := rows.Scan(&msgID, &isSummary, &masked, &viewTokens, &maskTokens); err != nil {
			return 0, err
		}
		if planned != nil && !planned(msgID) {
			return 0, fmt.Errorf("%w: message %d was not planned", ErrInvalid, msgID)
		}
		m := Message{Masked: masked.Bool, ViewTokens: int(viewTokens.Int64), MaskTokens: int(maskTokens.Int64)}
		n++
		if isSummary.Bool {
			t.summary += m.PromptTokens()
			continue
		}
		t.live += m.PromptTokens()
		t.count++
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return n, rows.Close()
}

// newRev returns a fresh history revision: random, so that revisions
// written by different processes, or by an NPC deleted and created again,
// never repeat one another.
func newRev() int64 { return rand.Int64() }

// newRevs returns two different fresh history revisions: the one a write
// moves the revision to when the revision it was given was still the
// stored one, and the one it moves it to otherwise (historyRevSQL).
func newRevs() (next, other int64) {
	next, other = newRev(), newRev()
	for other == next {
		other = newRev()
	}
	return next, other
}

// Totals are the running totals recomputed from the rows themselves.
type Totals struct {
	LiveTokens, SummaryTokens, LiveMessages, ArchivedMessages int
}

// Recount recomputes an NPC's totals from its messages. The running totals
// must always equal it; Repair writes it back when they do not.
func (s *Store) Recount(ctx context.Context, id string) (Totals, error) {
	var ms []Message
	if err := s.q(ctx).Select("state, summary, masked, view_tokens, mask_tokens").Where("character_id = ?", id).Find(&ms).Error; err != nil {
		return Totals{}, fmt.Errorf("recount %q: %w", id, err)
	}
	var t Totals
	for _, m := range ms {
		switch {
		case m.State == StateArchived:
			t.ArchivedMessages++
		case m.Summary:
			t.SummaryTokens += m.PromptTokens()
		default:
			t.LiveTokens += m.PromptTokens()
			t.LiveMessages++
		}
	}
	return t, nil
}

// Repair recomputes an NPC's running totals and writes them.
func (s *Store) Repair(ctx context.Context, id string) (Totals, error) {
	t, err := s.Recount(ctx, id)
	if err != nil {
		return t, err
	}
	return t, s.UpdateState(ctx, id, map[string]any{
		"live_tokens": t.LiveTokens, "summary_tokens": t.SummaryTokens,
		"live_messages": t.LiveMessages, "archived_messages": t.ArchivedMessages,
	})
}

// AddTick records a non-idle tick.
func (s *Store) AddTick(ctx context.Context, r *TickRecord) error {
	var err error
	if st, ok := s.prep.Stmt(ctx, s.db, insertTicksSQL[1]); ok {
		err = st.QueryRowContext(ctx, tickArgs(make([]any, 0, len(tickColumns)), r)...).Scan(&r.ID)
	} else {
		err = s.q(ctx).Create(r).Error
	}
	if err != nil {
		return fmt.Errorf("record tick %d of %q: %w", r.Tick, r.CharacterID, err)
	}
	return nil
}

// Ticks returns the recorded ticks of an NPC in [from, to] (0 means no
// bound), oldest first.
func (s *Store) Ticks(ctx context.Context, id string, from, to int64) ([]TickRecord, error) {
	q := s.q(ctx).Where("character_id = ?", id)
	if from > 0 {
		q = q.Where("tick >= ?", from)
	}
	if to > 0 {
		q = q.Where("tick <= ?", to)
	}
	var rs []TickRecord
	if err := q.Order("tick").Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("ticks of %q: %w", id, err)
	}
	return rs, nil
}

// normalizeEntity turns a display name into a profile key.
func normalizeEntity(name string) string {
	return strings.ToLower(strings.Join(strings.Fields(name), " "))
}

// EntityKey is the key a profile for name is stored under. A key made by
// ActorKey is returned as it is.
func EntityKey(name string) string {
	if IsActorKey(name) {
		return name
	}
	return normalizeEntity(name)
}

// actorKeyPrefix starts the profile key of a game's actor id. Names never
// hold it (events refuse it in names), so the two kinds of keys never meet.
const actorKeyPrefix = "@"

// ActorKey is the key of the profile of the actor the game identifies as
// id: the id verbatim (ids are case-sensitive), after a prefix no name
// holds. A renamed actor keeps the key; two actors of one name have two.
func ActorKey(id string) string { return actorKeyPrefix + id }

// IsActorKey reports whether key was made by ActorKey.
func IsActorKey(key string) bool { return len(key) > 1 && strings.HasPrefix(key, actorKeyPrefix) }

// latestMessageSQL reads the newest message id of each state through the
// (character_id, state, id) index, a lookup each: MAX(id) over the NPC
// alone would walk every message it ever had.
const latestMessageSQL = `SELECT MAX(m) FROM (
	SELECT MAX(id) AS m FROM messages WHERE character_id = ? AND state = '` + StateLive + `'
	UNION ALL
	SELECT MAX(id) AS m FROM messages WHERE character_id = ? AND state = '` + StateArchived + `') AS latest`

// LatestMessageID returns the id of the NPC's newest message, or 0.
func (s *Store) LatestMessageID(ctx context.Context, id string) (int64, error) {
	var n *int64
	if err := s.q(ctx).Raw(latestMessageSQL, id, id).Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("latest message of %q: %w", id, err)
	}
	if n == nil {
		return 0, nil
	}
	return *n, nil
}

// HasMessagesAfter reports whether NPC id has a message newer than after,
// leaving out the ids in except.
func (s *Store) HasMessagesAfter(ctx context.Context, id string, after int64, except ...int64) (bool, error) {
	q := s.q(ctx).Model(&Message{}).Select("id").Where("character_id = ? AND id > ?", id, after)
	if len(except) > 0 {
		q = q.Where("id NOT IN ?", except)
	}
	var ids []int64
	if err := q.Limit(1).Pluck("id", &ids).Error; err != nil {
		return false, fmt.Errorf("messages of %q after %d: %w", id, after, err)
	}
	return len(ids) > 0, nil
}
