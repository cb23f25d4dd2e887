package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

// Store reads and writes journal entries and memories. It is safe for
// concurrent use.
type Store struct {
	db   *gorm.DB
	hot  *gorm.DB // db with its statements kept prepared (store.Prepared); nil inside a transaction
	raw  bool     // keep relative dates as written
	inTx bool     // db is a transaction (WithTx)
	// prep keeps the inserts of a tick's commit prepared (SQLite), shared
	// by the Store and those WithTx makes of it.
	prep *store.TxStmts
	// onLoad, when set (by tests), is called before each read of the rows
	// of search results, with their kind.
	onLoad func(itemKind)
}

// NewStore returns a Store over db, whose schema Migrations has applied.
func NewStore(db *gorm.DB) *Store {
	return &Store{db: db, hot: store.Prepared(db), prep: &store.TxStmts{}}
}

// KeepingRelativeDates returns a Store that writes text as given, without
// grounding relative dates (see GroundDates): what an evaluation measures
// the grounding against.
func (s *Store) KeepingRelativeDates() *Store {
	c := *s
	c.raw = true
	return &c
}

// Ground returns GroundDates(text, at), or text as is when the Store keeps
// relative dates.
func (s *Store) Ground(text string, at time.Time) string {
	if s.raw {
		return text
	}
	return GroundDates(text, at)
}

// WithTx returns a Store whose calls run inside the transaction tx.
func (s *Store) WithTx(tx *gorm.DB) *Store {
	return &Store{db: tx, raw: s.raw, inTx: true, prep: s.prep}
}

// atomically runs fn in a transaction: the Store's own inside WithTx (an
// error there fails the caller's transaction, so no savepoint is needed),
// else a new one.
func (s *Store) atomically(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if s.inTx {
		return fn(s.q(ctx))
	}
	return store.RunTransaction(ctx, s.db, fn)
}

func (s *Store) q(ctx context.Context) *gorm.DB { return s.db.WithContext(ctx) }

// r is the handle of the hot reads of a search, whose statements have a
// fixed shape. Outside a transaction their statements stay prepared, since
// parsing one costs about as much as running it.
func (s *Store) r(ctx context.Context) *gorm.DB {
	if s.hot != nil {
		return s.hot.WithContext(ctx)
	}
	return s.q(ctx)
}

// Migrations is this package's schema, in order. Versions 3 (SQLite's FTS5
// tables) and 4 (PostgreSQL's full-text indexes) index the messages table of
// package character, whose migrations must be listed before these; version
// 5 drops them again.
func Migrations() []store.Migration {
	return []store.Migration{{
		Component: "journal", Version: 1, Name: "journal entries",
		Up: func(tx *gorm.DB) error { return tx.AutoMigrate(&Entry{}) },
	}, {
		Component: "journal", Version: 2, Name: "memories and the embedding cache",
		Up: func(tx *gorm.DB) error {
			if err := tx.AutoMigrate(&Memory{}, &memoryRev{}, &cachedEmbedding{}); err != nil {
				return err
			}
			// New entries of an NPC are read by id for the search index.
			entries, err := tableName(tx, &Entry{})
			if err != nil {
				return err
			}
			return tx.Exec(`CREATE INDEX IF NOT EXISTS idx_journal_char_id ON ` + entries + ` (character_id, id)`).Error
		},
	}, {
		Component: "journal", Version: 3, Name: "full-text indexes of memories, journal and messages",
		SQLite: ftsUp,
	}, {
		Component: "journal", Version: 4, Name: "PostgreSQL full-text indexes of memories, journal and messages",
		Postgres: tsUp,
	}, {
		// Store.Search ranks in Go over the NPC's own rows (keyword.go):
		// no commit pays for full-text indexes any more.
		Component: "journal", Version: 5, Name: "drop the full-text indexes",
		SQLite: ftsDown, Postgres: tsDown,
	}, {
		// The index of (character_id, consolidated_at) held every context
		// synthesis and, unconsolidated, every one was read to find the
		// few entries waiting; the partial index holds those alone.
		Component: "journal", Version: 6, Name: "entries waiting for consolidation",
		Up: func(tx *gorm.DB) error {
			entries, err := tableName(tx, &Entry{})
			if err != nil {
				return err
			}
			if err := tx.Exec(`DROP INDEX IF EXISTS idx_journal_char_cons`).Error; err != nil {
				return err
			}
			return tx.Exec(`CREATE INDEX IF NOT EXISTS idx_journal_pending ON ` + entries + ` (character_id, id) WHERE ` + pendingWhere).Error
		},
	}, {
		// A compaction pins the notable entries citing its span: the
		// newest message each entry cites finds them through an index,
		// whatever the length of the journal, the pace of the NPC and the
		// clocks of the daemons that wrote them (ListQuery.CitingFrom).
		Component: "journal", Version: 7, Name: "entries by the newest message they cite",
		Up: func(tx *gorm.DB) error {
			if tx.Migrator().HasColumn(&Entry{}, "LatestSource") {
				return nil
			}
			return tx.Migrator().AddColumn(&Entry{}, "LatestSource")
		},
		SQLite:   func(tx *gorm.DB) error { return latestSourceUp(tx, latestSourceSQLite) },
		Postgres: func(tx *gorm.DB) error { return latestSourceUp(tx, latestSourcePostgres) },
	}, {
		// A busy tick writes an entry or more of the common types (what
		// was said, what was seen), and each went into an index on its
		// type and one on the newest message it cites: two more pages of
		// the NPC's to write at every commit. Those entries are never read
		// through either: a list of a common type reads the NPC's entries
		// newest first, nearly all of that type, and only notable entries
		// are looked up by the messages they cite (sleep.Compactor.Pinned).
		// Each index now holds the rows it finds alone.
		Component: "journal", Version: 8, Name: "indexes of the rarer types and of the notable entries alone",
		Up: func(tx *gorm.DB) error {
			entries, err := tableName(tx, &Entry{})
			if err != nil {
				return err
			}
			return store.Exec(tx,
				`DROP INDEX IF EXISTS idx_journal_char_type`,
				`CREATE INDEX IF NOT EXISTS idx_journal_rare_type ON `+entries+` (character_id, type) WHERE `+rareTypeWhere,
				`DROP INDEX IF EXISTS idx_journal_char_source`,
				`CREATE INDEX IF NOT EXISTS idx_journal_notable_source ON `+entries+` (character_id, latest_source) WHERE `+notableWhere)
		},
	}}
}

// NotableImportance is the importance from which an entry is notable: a
// compaction keeps the notable entries citing its span word for word
// (sleep.PinImportance), and finds them through an index that holds
// them alone (ListQuery.CitingFrom).
const NotableImportance = 8

// rareTypeWhere and notableWhere select the entries of the partial indexes
// of journal migration 8, in their words: a database uses a partial index
// only for a query whose condition it can tell implies the index's, so the
// values are written out, not parameters (see listSQL). commonTypes are
// the types rareTypeWhere leaves out.
var (
	commonTypes   = []string{TypeObservation, TypeConversation}
	rareTypeWhere = "type NOT IN ('" + strings.Join(commonTypes, "', '") + "')"
	notableWhere  = "importance >= " + strconv.Itoa(NotableImportance)
)

// latestSourceSQLite and latestSourcePostgres are the newest message id in
// an entry's sources, for the entries written before migration 7: on
// SQLite read from its JSON where that is valid, on PostgreSQL from the
// text of its list of ids, where a cast of a row that is not JSON would
// fail the migration. The rows without message ids keep 0.
const (
	latestSourceSQLite   = `COALESCE((SELECT max(value) FROM json_each(sources, '$.message_ids') WHERE type = 'integer'), 0)`
	latestSourcePostgres = `COALESCE((SELECT max(v::bigint) FROM unnest(string_to_array((regexp_match(sources, '"message_ids":\[([0-9,]+)\]'))[1], ',')) AS v), 0)`
)

// latestSourceUp sets Entry.LatestSource of the entries written before Add
// kept it, to the expression newest, and indexes it.
func latestSourceUp(tx *gorm.DB, newest string) error {
	entries, err := tableName(tx, &Entry{})
	if err != nil {
		return err
	}
	where := `sources LIKE '%"message_ids":[%'`
	if store.IsSQLite(tx) {
		where += ` AND json_valid(sources)`
	}
	if err := tx.Exec(`UPDATE ` + entries + ` SET latest_source = ` + newest + ` WHERE ` + where).Error; err != nil {
		return fmt.Errorf("newest message cited by each journal entry: %w", err)
	}
	return tx.Exec(`CREATE INDEX IF NOT EXISTS idx_journal_char_source ON ` + entries + ` (character_id, latest_source)`).Error
}

// Add appends entries for NPC id, setting their ids. Content is cut to
// MaxEntryBytes, importance clamped to 1–10, and an unknown type refused.
func (s *Store) Add(ctx context.Context, id string, entries ...*Entry) error {
	_, err := s.AddFollowing(ctx, id, entries...)
	return err
}

// AddFollowing is Add, also returning the id of NPC id's newest entry
// before these as the statement that added them found it (0 when it had
// none), or -1 when it cannot tell (PostgreSQL; more entries than one
// statement inserts; none given). Inside a transaction on SQLite, which
// writes one transaction at a time, no entry of the NPC came between that
// one and these: a search index holding the NPC's entries up to it can
// take these as they are (Retriever.AppendedEntries).
func (s *Store) AddFollowing(ctx context.Context, id string, entries ...*Entry) (prev int64, err error) {
	if len(entries) == 0 {
		return -1, nil
	}
	now := time.Now().UTC()
	for _, e := range entries {
		if !ValidType(e.Type) {
			return -1, fmt.Errorf("%w: entry type %q", ErrInvalid, e.Type)
		}
		e.ID = 0
		e.CharacterID = id
		e.Content = cut(e.Content, MaxEntryBytes)
		e.Importance = max(1, min(10, e.Importance))
		if e.CreatedAt.IsZero() {
			e.CreatedAt = now
		}
		if e.GameTime.IsZero() {
			e.GameTime = e.CreatedAt
		}
		e.Content = s.Ground(e.Content, e.GameTime)
		e.LatestSource = 0
		if ids := e.Sources.V.MessageIDs; len(ids) > 0 {
			e.LatestSource = slices.Max(ids)
		}
	}
	// The prepared statement needs only the transaction s.db holds; the
	// gorm session that carries ctx is made only for the ordinary way.
	if done, prev, err := s.insertEntries(ctx, s.db, entries); err != nil {
		return -1, fmt.Errorf("add journal entries for %q: %w", id, err)
	} else if done {
		return prev, nil
	}
	if err := s.q(ctx).CreateInBatches(entries, 100).Error; err != nil {
		return -1, fmt.Errorf("add journal entries for %q: %w", id, err)
	}
	return -1, nil
}

// entryColumns are the columns gorm writes for a new Entry, in its order;
// insertEntries gives the values in the same order.
var entryColumns = []string{"character_id", "type", "content", "importance", "game_time", "created_at", "consolidated_at", "sources", "metadata", "latest_source"}

// insertEntriesSQL[n] inserts n entries (SQLite), 1 ≤ n ≤
// character.MaxPreparedRows, returning for each its id and the id of the
// NPC's entry before it (NULL for none), which SQLite reads as it inserts
// the row: for the first row, the NPC's newest entry before the statement.
var insertEntriesSQL = func() (out [character.MaxPreparedRows + 1]string) {
	for n := 1; n <= character.MaxPreparedRows; n++ {
		out[n] = store.InsertSQL("entries", entryColumns, n,
			"RETURNING `id`, (SELECT MAX(p.id) FROM `entries` AS p WHERE p.character_id = `entries`.character_id AND p.id < `entries`.id)")
	}
	return out
}()

// insertEntries inserts entries as they are through a prepared statement
// inside an SQLite transaction, setting their ids, and reports false when
// it cannot (then nothing was written and the caller inserts them the
// ordinary way). prev is the id of the NPC's newest entry before them (see
// AddFollowing).
func (s *Store) insertEntries(ctx context.Context, db *gorm.DB, entries []*Entry) (done bool, prev int64, err error) {
	if len(entries) > character.MaxPreparedRows {
		return false, -1, nil
	}
	st, ok := s.prep.Stmt(ctx, db, insertEntriesSQL[len(entries)])
	if !ok {
		return false, -1, nil
	}
	args := make([]any, 0, len(entries)*len(entryColumns))
	for _, e := range entries {
		args = append(args, e.CharacterID, e.Type, e.Content, e.Importance, e.GameTime, e.CreatedAt, e.ConsolidatedAt, e.Sources, e.Metadata, e.LatestSource)
	}
	// The entry before the first is the NPC's newest before these; those
	// before the others are the entries just added.
	var first, later sql.NullInt64
	err = store.ScanReturned(ctx, st, args, len(entries), func(i int) []any {
		if i == 0 {
			return []any{&entries[i].ID, &first}
		}
		return []any{&entries[i].ID, &later}
	})
	if err != nil {
		return true, -1, err
	}
	return true, first.Int64, nil
}

// ListQuery selects entries.
type ListQuery struct {
	Type           string // "" for every type
	Before         int64  // only ids below; 0 for no bound
	Limit          int    // newest Limit entries; 0 for all
	MinImportance  int
	SourceMessages []int64 // only entries citing one of these message ids (filtered in Go)
	// CitingFrom, when set, reads only the entries citing a message of
	// this id or a newer one (Entry.LatestSource), through an index when
	// MinImportance is NotableImportance or more (the index holds the
	// notable entries alone): with SourceMessages from this id on, the
	// journal is not read whole for the notable entries citing the live
	// history.
	CitingFrom int64
}

// List returns entries of NPC id oldest first.
func (s *Store) List(ctx context.Context, id string, lq ListQuery) ([]Entry, error) {
	es, err := s.listRows(ctx, id, lq)
	if err != nil {
		return nil, fmt.Errorf("journal of %q: %w", id, err)
	}
	if lq.Limit > 0 {
		slices.Reverse(es)
	}
	if len(lq.SourceMessages) > 0 {
		want := map[int64]bool{}
		for _, m := range lq.SourceMessages {
			want[m] = true
		}
		kept := es[:0]
		for _, e := range es {
			for _, m := range e.Sources.V.MessageIDs {
				if want[m] {
					kept = append(kept, e)
					break
				}
			}
		}
		es = kept
	}
	return es, nil
}

// listRows reads the entries List returns, before its filter by
// SourceMessages, in the order of listSQL. The statement, of a few shapes,
// stays prepared outside a transaction, and its rows are scanned by hand:
// a compaction lists the entries citing its span before its summary
// (sleep.Compactor.Pinned), and gorm's way cost it a tenth of a
// millisecond.
func (s *Store) listRows(ctx context.Context, id string, lq ListQuery) ([]Entry, error) {
	text, args := listSQL(id, lq, store.IsSQLite(s.db))
	rows, err := s.hotQuery(ctx, text, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var es []Entry
	for rows.Next() {
		es = append(es, Entry{})
		e := &es[len(es)-1]
		if err := rows.Scan(&e.ID, &e.CharacterID, &e.Type, &e.Content, &e.Importance, store.TimeText{T: &e.GameTime},
			store.TimeText{T: &e.CreatedAt}, store.TimePtrText{T: &e.ConsolidatedAt}, &e.Sources, &e.Metadata, &e.LatestSource); err != nil {
			return nil, err
		}
	}
	return es, rows.Err()
}

// entryList is Entry's columns in the order listRows scans them: its id,
// then those it is written with.
var entryList = "id, " + strings.Join(entryColumns, ", ")

// listSQL is the statement listRows reads the entries of NPC id with, and
// its arguments: its text depends on which of lq's bounds are set, not on
// their values, and reads the times as text on SQLite (see store.TimeText).
func listSQL(id string, lq ListQuery, sqlite bool) (string, []any) {
	shape, args := 0, []any{id}
	if lq.Type != "" {
		shape, args = shape|1, append(args, lq.Type)
	}
	if lq.Before > 0 {
		shape, args = shape|2, append(args, lq.Before)
	}
	if lq.MinImportance > 0 {
		shape, args = shape|4, append(args, lq.MinImportance)
	}
	if lq.CitingFrom > 0 {
		shape, args = shape|8, append(args, lq.CitingFrom)
	}
	if lq.Limit > 0 {
		shape, args = shape|16, append(args, lq.Limit)
	}
	if lq.Type != "" && !slices.Contains(commonTypes, lq.Type) {
		shape |= 32 // through the index of the rarer types
	}
	if lq.CitingFrom > 0 && lq.MinImportance >= NotableImportance {
		shape |= 64 // through the index of the notable entries
	}
	if sqlite {
		return listTexts[1][shape], args
	}
	return listTexts[0][shape], args
}

// listTexts holds listSQL's statements, by dialect (SQLite second) and
// shape. A list of a rarer type, and one of the notable entries citing
// some message on, repeat their partial index's condition (see
// rareTypeWhere), so that the database reads them through it.
var listTexts = func() (out [2][128]string) {
	for shape := range 128 {
		q := "SELECT " + entryList + " FROM entries WHERE character_id = ?"
		for i, cond := range []string{" AND type = ?", " AND id < ?", " AND importance >= ?", " AND latest_source >= ?"} {
			if shape&(1<<i) != 0 {
				q += cond
			}
		}
		if shape&32 != 0 {
			q += " AND " + rareTypeWhere
		}
		if shape&64 != 0 {
			q += " AND " + notableWhere
		}
		if shape&16 != 0 {
			q += " ORDER BY id DESC LIMIT ?"
		} else {
			q += " ORDER BY id"
		}
		out[0][shape] = q
		out[1][shape] = store.TimesAsText(q, "game_time", "created_at", "consolidated_at")
	}
	return out
}()

// Get returns one entry of NPC id.
func (s *Store) Get(ctx context.Context, id string, entryID int64) (*Entry, error) {
	var e Entry
	err := s.q(ctx).Where("character_id = ? AND id = ?", id, entryID).Take(&e).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("%w: journal entry %d of npc %q", ErrNotFound, entryID, id)
	}
	if err != nil {
		return nil, fmt.Errorf("journal entry %d of %q: %w", entryID, id, err)
	}
	return &e, nil
}

// MarkConsolidated sets ConsolidatedAt on entries of NPC id.
func (s *Store) MarkConsolidated(ctx context.Context, id string, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.q(ctx).Model(&Entry{}).Where("character_id = ? AND id IN ?", id, ids).Update("consolidated_at", at.UTC()).Error
	if err != nil {
		return fmt.Errorf("mark consolidated for %q: %w", id, err)
	}
	return nil
}

// DeleteNPC removes every journal entry and memory of NPC id inside tx (the
// transaction that deletes the NPC). Cached embeddings are shared by text
// across NPCs and stay.
func (s *Store) DeleteNPC(ctx context.Context, tx *gorm.DB, id string) error {
	for _, m := range []any{&Entry{}, &Memory{}, &memoryRev{}} {
		if err := tx.WithContext(ctx).Where("character_id = ?", id).Delete(m).Error; err != nil {
			return fmt.Errorf("delete journal of %q: %w", id, err)
		}
	}
	return nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// maxProvenance bounds the journal entries Provenance reads for one set of
// sources.
const maxProvenance = 2000

// Provenance returns src with the messages and game events behind the
// journal entries it cites added, following entries that cite entries
// (a reflection on conversations, a fact from a reflection) to the end, so
// that what sleep writes from entries cites the game's events as the
// entries did. Entries of another NPC are ignored.
func (s *Store) Provenance(ctx context.Context, npc string, src character.Sources) (character.Sources, error) {
	out := cleanSources(src)
	seen := map[int64]bool{}
	next := append([]int64(nil), src.JournalIDs...)
	for len(next) > 0 && len(seen) < maxProvenance {
		var ids []int64
		for _, id := range next {
			if !seen[id] && len(seen) < maxProvenance {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		next = nil
		if len(ids) == 0 {
			break
		}
		var es []Entry
		if err := s.q(ctx).Select("id, sources").Where("character_id = ? AND id IN ?", npc, ids).Find(&es).Error; err != nil {
			return out, fmt.Errorf("provenance for %q: %w", npc, err)
		}
		for _, e := range es {
			mergeSources(&out, e.Sources.V)
			next = append(next, e.Sources.V.JournalIDs...)
		}
	}
	return out, nil
}
