package journal

import (
	"context"
	"database/sql"
	"strings"

	"github.com/npcd/npcd/store"
)

// The hot reads of a search: the refresh of an NPC's index (its new
// messages and journal entries, its marks, its changed memories) and the
// rows of the results. Every search runs them, so they skip gorm's
// statement building and scanning: their statement texts are fixed (an id
// list padded to a power of two, see store.PadIn), kept prepared on
// SQLite (store.Stmt), and their rows are scanned by hand.

// hotQuery runs query, written with ? placeholders, through its prepared
// statement when the Store keeps one, else through gorm (PostgreSQL, or
// inside a transaction).
func (s *Store) hotQuery(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := store.Stmt(ctx, s.hot, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.r(ctx).Raw(query, args...).Rows()
}

// newMemoriesSQL reads an NPC's memories changed since a revision, for
// refresh.
const newMemoriesSQL = `SELECT id, content, entity, importance, game_time, superseded_by, embedding, embed_model
	FROM memories WHERE character_id = ? AND rev > ? ORDER BY id`

// newMemoriesSQLite is newMemoriesSQL on SQLite, the time read as text
// (see store.TimeText).
var newMemoriesSQLite = store.TimesAsText(newMemoriesSQL, "game_time")

// sqliteText returns sqliteQuery, a statement whose times are read as text
// (see store.TimeText), on SQLite, else query, the same statement reading
// them as they are.
func (s *Store) sqliteText(sqliteQuery, query string) string {
	if store.IsSQLite(s.db) {
		return sqliteQuery
	}
	return query
}

// maxLoadIDs bounds the ids of one result read; longer lists are read in
// parts.
const maxLoadIDs = 256

// loadSQL holds, for each kind of item and each padded length n (a power of
// two up to maxLoadIDs, at index log2 n), the statement that reads the
// rows of n ids as results show them; loadSQLite the same statements on
// SQLite, their times read as text (see store.TimeText).
var loadSQL, loadSQLite = buildLoadSQL("game_time"), buildLoadSQL("+game_time")

func buildLoadSQL(gameTime string) (out [3][]string) {
	heads := [3]string{
		kindMemory:  "SELECT id, character_id, content, sources, " + gameTime + ", importance FROM memories WHERE id IN (",
		kindJournal: "SELECT id, character_id, content, sources, " + gameTime + ", importance FROM entries WHERE id IN (",
		kindMessage: "SELECT id, character_id, summary, content, event_refs, " + gameTime + " FROM messages WHERE id IN (",
	}
	for k, head := range heads {
		for n := 1; n <= maxLoadIDs; n *= 2 {
			out[k] = append(out[k], head+strings.TrimSuffix(strings.Repeat("?, ", n), ", ")+")")
		}
	}
	return out
}

// loadQuery returns the statement reading the rows of ids, a list whose
// length is a power of two up to maxLoadIDs, of items of kind k: from
// loadSQLite when sqlite, else from loadSQL.
func loadQuery(k itemKind, n int, sqlite bool) string {
	i := 0
	for 1<<i < n {
		i++
	}
	if sqlite {
		return loadSQLite[k][i]
	}
	return loadSQL[k][i]
}

// idArgs returns ids as statement arguments.
func idArgs(ids []int64) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}
