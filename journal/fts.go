package journal

import (
	"fmt"
	"strings"
	"unicode"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

// Migrations 3 (SQLite) and 4 (PostgreSQL) made full-text indexes for
// Store.Search, which migration 5 drops again: Store.Search now ranks in Go
// over the NPC's own rows (see keyword.go), and the Retriever always did
// (npcIndex.keyword). The steps stay as they were, since a database records
// them by version; on a new database 5 undoes at once what 3 or 4 made of
// its empty tables.
//
// Migration 3 made SQLite FTS5 tables: one external-content table per
// source table (memories, journal entries, the messages of package
// character), kept in step by triggers on every insert, update and delete.
// The tokenizer was porter (English stemming) over unicode61 with
// diacritics removed.
//
// Migration 4 made PostgreSQL's full-text search: the text search
// configuration npcd_search (English stemming, after unaccent where the
// server has that extension) and a GIN index over each source table's
// to_tsvector expression.
const ftsTokenizer = `porter unicode61 remove_diacritics 2`

// ftsTable describes one FTS5 table of migration 3 over a content table,
// and the PostgreSQL index of migration 4 over the same columns.
type ftsTable struct {
	name    string   // the FTS table
	model   any      // the gorm model of the table it indexes
	cols    []string // indexed columns, character_id first
	content string   // the table it indexes, as gorm names it
	// tsv is the PostgreSQL tsvector of the text columns, the expression
	// the GIN index is over.
	tsv string
}

// ftsTables lists the FTS tables in itemKind order, with their content
// tables named as gorm names them on db.
func ftsTables(db *gorm.DB) ([]ftsTable, error) {
	ts := []ftsTable{
		{name: "memories_fts", model: &Memory{}, cols: []string{"character_id", "content", "entity"},
			tsv: `(setweight(to_tsvector('npcd_search', coalesce(content, '')), 'A') || setweight(to_tsvector('npcd_search', coalesce(entity, '')), 'B'))`},
		{name: "journal_fts", model: &Entry{}, cols: []string{"character_id", "content"},
			tsv: `to_tsvector('npcd_search', coalesce(content, ''))`},
		{name: "messages_fts", model: &character.Message{}, cols: []string{"character_id", "content"},
			tsv: `to_tsvector('npcd_search', coalesce(content, ''))`},
	}
	for i := range ts {
		name, err := tableName(db, ts[i].model)
		if err != nil {
			return nil, err
		}
		ts[i].content = name
	}
	return ts, nil
}

// tableName returns the table gorm uses for model.
func tableName(db *gorm.DB, model any) (string, error) {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		return "", fmt.Errorf("table of %T: %w", model, err)
	}
	return stmt.Schema.Table, nil
}

// ftsUp creates the FTS tables and their triggers and indexes every
// existing row (SQLite only). The messages table belongs to package
// character, whose migrations must run first.
func ftsUp(tx *gorm.DB) error {
	tables, err := ftsTables(tx)
	if err != nil {
		return err
	}
	for _, t := range tables {
		cols := strings.Join(t.cols, ", ")
		newVals := "new.id, new." + strings.Join(t.cols, ", new.")
		oldVals := "old.id, old." + strings.Join(t.cols, ", old.")
		stmts := []string{
			fmt.Sprintf(`CREATE VIRTUAL TABLE %s USING fts5(%s, content='%s', content_rowid='id', tokenize='%s')`,
				t.name, cols, t.content, ftsTokenizer),
			fmt.Sprintf(`CREATE TRIGGER %[1]s_ai AFTER INSERT ON %[2]s BEGIN
				INSERT INTO %[1]s (rowid, %[3]s) VALUES (%[4]s); END`, t.name, t.content, cols, newVals),
			fmt.Sprintf(`CREATE TRIGGER %[1]s_ad AFTER DELETE ON %[2]s BEGIN
				INSERT INTO %[1]s (%[1]s, rowid, %[3]s) VALUES ('delete', %[4]s); END`, t.name, t.content, cols, oldVals),
			// Only a change of an indexed column re-indexes the row, so
			// archiving or masking a message costs nothing here.
			fmt.Sprintf(`CREATE TRIGGER %[1]s_au AFTER UPDATE OF %[3]s ON %[2]s BEGIN
				INSERT INTO %[1]s (%[1]s, rowid, %[3]s) VALUES ('delete', %[4]s);
				INSERT INTO %[1]s (rowid, %[3]s) VALUES (%[5]s); END`, t.name, t.content, cols, oldVals, newVals),
			fmt.Sprintf(`INSERT INTO %[1]s (%[1]s) VALUES ('rebuild')`, t.name),
		}
		if err := store.Exec(tx, stmts...); err != nil {
			return fmt.Errorf("full-text index %s: %w", t.name, err)
		}
	}
	return nil
}

// tsUp makes PostgreSQL's full-text search: the text search configuration
// npcd_search and a GIN index per source table. unaccent is used when the
// server has it (it comes with PostgreSQL's contrib modules); without it,
// accents are kept.
func tsUp(tx *gorm.DB) error {
	var unaccent string
	err := tx.Raw(`SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'unaccent'`).Scan(&unaccent).Error
	if err != nil {
		return fmt.Errorf("full-text search: %w", err)
	}
	if unaccent == "" {
		var available bool
		if err := tx.Raw(`SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'unaccent')`).Scan(&available).Error; err != nil {
			return fmt.Errorf("full-text search: %w", err)
		}
		if available {
			// Creating an extension may need rights the user lacks; the
			// savepoint keeps the migration going without it.
			tx.SavePoint("unaccent")
			if err := tx.Exec(`CREATE EXTENSION IF NOT EXISTS unaccent`).Error; err != nil {
				tx.RollbackTo("unaccent")
			} else if err := tx.Raw(`SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'unaccent'`).Scan(&unaccent).Error; err != nil {
				return fmt.Errorf("full-text search: %w", err)
			}
		}
	}
	stmts := []string{`CREATE TEXT SEARCH CONFIGURATION npcd_search (COPY = pg_catalog.english)`}
	if unaccent != "" {
		stmts = append(stmts, `ALTER TEXT SEARCH CONFIGURATION npcd_search ALTER MAPPING FOR hword, hword_part, word WITH `+
			quoteIdent(unaccent)+`.unaccent, english_stem`)
	}
	tables, err := ftsTables(tx)
	if err != nil {
		return err
	}
	for _, t := range tables {
		stmts = append(stmts, fmt.Sprintf(`CREATE INDEX %s_tsv ON %s USING gin (%s)`, t.content, t.content, t.tsv))
	}
	if err := store.Exec(tx, stmts...); err != nil {
		return fmt.Errorf("full-text search: %w", err)
	}
	return nil
}

// ftsDown drops the FTS5 tables of migration 3 and their triggers (SQLite
// only). Dropping an FTS5 table drops its shadow tables with it; their
// pages are reused by later rows (the file shrinks only by a VACUUM).
func ftsDown(tx *gorm.DB) error {
	tables, err := ftsTables(tx)
	if err != nil {
		return err
	}
	for _, t := range tables {
		for _, s := range []string{
			`DROP TRIGGER IF EXISTS ` + t.name + `_ai`,
			`DROP TRIGGER IF EXISTS ` + t.name + `_ad`,
			`DROP TRIGGER IF EXISTS ` + t.name + `_au`,
			`DROP TABLE IF EXISTS ` + t.name,
		} {
			if err := tx.Exec(s).Error; err != nil {
				return fmt.Errorf("drop full-text index %s: %w", t.name, err)
			}
		}
	}
	return nil
}

// tsDown drops the GIN indexes of migration 4 and then the text search
// configuration npcd_search they use (PostgreSQL only). The unaccent
// extension stays: migration 4 may not have been the one to create it.
func tsDown(tx *gorm.DB) error {
	tables, err := ftsTables(tx)
	if err != nil {
		return err
	}
	var stmts []string
	for _, t := range tables {
		stmts = append(stmts, `DROP INDEX IF EXISTS `+quoteIdent(t.content+"_tsv"))
	}
	stmts = append(stmts, `DROP TEXT SEARCH CONFIGURATION IF EXISTS npcd_search`)
	if err := store.Exec(tx, stmts...); err != nil {
		return fmt.Errorf("drop full-text search: %w", err)
	}
	return nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// ftsWords splits free text into lowercase words of letters and digits.
// Everything else — quotes, operators' punctuation (* ^ : + - ( ) { }),
// control characters — separates words, so a word is never syntax.
func ftsWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// Terms splits text into lowercase search terms, dropping stop words, words
// of one letter and repeats, in order of first appearance.
func Terms(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range ftsWords(text) {
		if !searchable(f) || seen[f] {
			continue
		}
		seen[f] = true
		out = append(out, f)
	}
	return out
}

// isIdeograph reports whether a one-character word is a CJK ideograph, which
// carries meaning on its own.
func isIdeograph(w string) bool {
	for _, r := range w {
		return unicode.Is(unicode.Han, r)
	}
	return false
}

var stopWords = words(`a an and are as at be but by did do does for from had has have he her him his how
	i if in into is it its me my no not of on or our she so than that the their them then there these
	they this to too up us was we were what when where which who whom why will with you your
	about after all also am any been before being can could did doing done each few got get just more
	most much other own same some such very would should ok okay oh yes yeah hey hi im ive id dont didnt
	says said say tell told`)

// itemKind is what a search hit is; its order follows ftsTables.
type itemKind uint8

const (
	kindMemory itemKind = iota
	kindJournal
	kindMessage
)

func (k itemKind) String() string {
	switch k {
	case kindMemory:
		return KindMemory
	case kindJournal:
		return KindJournal
	}
	return KindMessage
}
