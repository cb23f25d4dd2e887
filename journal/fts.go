package journal

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

// Full-text search is SQLite's FTS5: one external-content table per source
// table (memories, journal entries, the messages of package character),
// kept in step by triggers, ranked with BM25; Store.Search uses it. Each FTS
// table indexes the NPC id next to the text, so a query intersects with one
// NPC's rows inside the index; the id column has weight 0 in BM25, and
// results are checked against the exact NPC id afterwards, since the
// tokenizer reads "a-b" and "a_b" alike. The Retriever ranks keywords in
// memory instead (see npcIndex.keyword).
//
// The tokenizer is porter (English stemming) over unicode61 with diacritics
// removed, so "swords" matches "sword" and "café" matches "cafe".
//
// On PostgreSQL it is PostgreSQL's own full-text search (migration 4): a GIN
// index over each source table's to_tsvector expression, with the text
// search configuration npcd_search (English stemming, like porter, after
// unaccent where the server has that extension, like remove_diacritics),
// ranked with ts_rank; see keywordPostgres.
const ftsTokenizer = `porter unicode61 remove_diacritics 2`

// ftsTable describes one FTS5 table over a content table, and the
// PostgreSQL index of the same columns.
type ftsTable struct {
	name    string   // the FTS table
	model   any      // the gorm model of the table it indexes
	cols    []string // indexed columns, character_id first
	weights string   // bm25 column weights, in cols order
	content string   // the table it indexes, as gorm names it
	// tsv is the PostgreSQL tsvector of the text columns (the expression
	// the GIN index is over, so queries must use it as is), and tsWeights
	// the ts_rank weights of its labels {D, C, B, A}.
	tsv, tsWeights string
}

// ftsTables lists the FTS tables in itemKind order, with their content
// tables named as gorm names them on db.
func ftsTables(db *gorm.DB) ([]ftsTable, error) {
	ts := []ftsTable{
		{name: "memories_fts", model: &Memory{}, cols: []string{"character_id", "content", "entity"}, weights: "0.0, 1.0, 0.5",
			tsv:       `(setweight(to_tsvector('npcd_search', coalesce(content, '')), 'A') || setweight(to_tsvector('npcd_search', coalesce(entity, '')), 'B'))`,
			tsWeights: "{0, 0, 0.5, 1}"},
		{name: "journal_fts", model: &Entry{}, cols: []string{"character_id", "content"}, weights: "0.0, 1.0",
			tsv: `to_tsvector('npcd_search', coalesce(content, ''))`, tsWeights: "{1, 0, 0, 0}"},
		{name: "messages_fts", model: &character.Message{}, cols: []string{"character_id", "content"}, weights: "0.0, 1.0",
			tsv: `to_tsvector('npcd_search', coalesce(content, ''))`, tsWeights: "{1, 0, 0, 0}"},
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
		for _, s := range stmts {
			if err := tx.Exec(s).Error; err != nil {
				return fmt.Errorf("full-text index %s: %w", t.name, err)
			}
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
	for _, s := range stmts {
		if err := tx.Exec(s).Error; err != nil {
			return fmt.Errorf("full-text search: %w", err)
		}
	}
	return nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// ftsWords splits free text into lowercase words of letters and digits.
// Everything else — quotes, operators' punctuation (* ^ : + - ( ) { }),
// control characters — separates words, so no character of user text can
// reach FTS5 as syntax.
func ftsWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// matchTerms builds an FTS5 MATCH expression that matches rows containing
// any of terms and, when npc is not empty, whose character_id column holds
// npc. Every term and the NPC id are double-quoted strings, so words such as
// AND, OR, NOT and NEAR are searched for, never obeyed. It returns "" when
// there are no terms: the caller then searches nothing.
func matchTerms(npc string, terms []string) string {
	if len(terms) == 0 {
		return ""
	}
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = ftsQuote(t)
	}
	any := strings.Join(quoted, " OR ")
	if npc == "" {
		return any
	}
	return "character_id : " + ftsQuote(npc) + " AND (" + any + ")"
}

// ftsQuote makes s an FTS5 string: inside double quotes only a double quote
// is special, and it is escaped by doubling.
func ftsQuote(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// kwHit is one keyword match: a row of a source table and its BM25 score
// (higher is better).
type kwHit struct {
	kind  itemKind
	id    int64
	score float64
}

// keywordSearch ranks the rows matching the query's terms in every source
// table, best first per table, at most limit per table. It matches NPC
// npc's rows, and may return other NPCs' rows too: the caller keeps its
// NPC's. BM25's statistics here are those of the whole table; the
// retriever ranks with the NPC's own instead (see npcIndex.keyword).
func (s *Store) keywordSearch(ctx context.Context, npc string, terms []string, limit int) ([]kwHit, error) {
	if len(terms) == 0 || limit <= 0 {
		return nil, nil
	}
	tables, err := ftsTables(s.db)
	if err != nil {
		return nil, err
	}
	if !store.IsSQLite(s.db) {
		return s.keywordPostgres(ctx, npc, terms, tables, limit)
	}
	var out []kwHit
	match := matchTerms(npc, terms)
	for i, t := range tables {
		type row struct {
			ID    int64
			Score float64
		}
		var rows []row
		// bm25() is lower for better matches. The content table is not
		// joined here: reading its rows for every match would cost more
		// than the search. Hits of another NPC whose id tokenizes alike,
		// and message summaries (also found as the compaction's
		// context_synthesis entry), are dropped by the caller, which reads
		// only the NPC's searchable rows.
		q := fmt.Sprintf(`SELECT rowid AS id, -bm25(%[1]s, %[2]s) AS score FROM %[1]s
			WHERE %[1]s MATCH ? ORDER BY bm25(%[1]s, %[2]s) LIMIT ?`, t.name, t.weights)
		if err := s.q(ctx).Raw(q, match, limit).Scan(&rows).Error; err != nil {
			return nil, fmt.Errorf("keyword search %s of %q: %w", t.content, npc, err)
		}
		for _, r := range rows {
			out = append(out, kwHit{kind: itemKind(i), id: r.ID, score: r.Score})
		}
	}
	return out, nil
}

// keywordPostgres is keywordSearch on PostgreSQL: rows of NPC npc whose
// tsvector matches any term, ranked with ts_rank (normalised by the log of
// the document's length, as BM25 favours short matches).
func (s *Store) keywordPostgres(ctx context.Context, npc string, terms []string, tables []ftsTable, limit int) ([]kwHit, error) {
	// One plainto_tsquery per term, ORed: every term is a bound
	// parameter, so nothing in it is tsquery syntax.
	qs := make([]string, len(terms))
	args := make([]any, len(terms))
	for i, t := range terms {
		qs[i] = "plainto_tsquery('npcd_search', ?)"
		args[i] = t
	}
	tsq := "(" + strings.Join(qs, " || ") + ")"
	var out []kwHit
	for i, t := range tables {
		var rows []struct {
			ID    int64
			Score float64
		}
		q := fmt.Sprintf(`SELECT id, ts_rank('%[1]s', %[2]s, query.q, 1) AS score FROM %[3]s, (SELECT %[4]s AS q) AS query
			WHERE character_id = ? AND %[2]s @@ query.q ORDER BY score DESC, id DESC LIMIT ?`, t.tsWeights, t.tsv, t.content, tsq)
		if err := s.q(ctx).Raw(q, append(append(append([]any{}, args...), npc), limit)...).Scan(&rows).Error; err != nil {
			return nil, fmt.Errorf("keyword search %s of %q: %w", t.content, npc, err)
		}
		for _, r := range rows {
			out = append(out, kwHit{kind: itemKind(i), id: r.ID, score: r.Score})
		}
	}
	return out, nil
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
