package tick

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gormsqlite "gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/schema"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/store"
)

// stmtLog records the statements and transactions run through a
// countingConnector, prepared ones included (gorm's callbacks see only
// those gorm runs itself); fail, when set, is asked about each statement
// before it runs, and the statement fails with the error it returns.
type stmtLog struct {
	mu    sync.Mutex
	stmts []string
	txs   int
	fail  func(query string) error
}

// ran records query, a statement about to run, and returns the error it
// must fail with (see fail), if any.
func (l *stmtLog) ran(query string) error {
	q := strings.Join(strings.Fields(query), " ")
	l.mu.Lock()
	l.stmts = append(l.stmts, q)
	fail := l.fail
	l.mu.Unlock()
	if fail != nil {
		return fail(q)
	}
	return nil
}

// failWith sets the statements that fail (see stmtLog); nil fails none.
func (l *stmtLog) failWith(fail func(query string) error) {
	l.mu.Lock()
	l.fail = fail
	l.mu.Unlock()
}

func (l *stmtLog) began() {
	l.mu.Lock()
	l.txs++
	l.mu.Unlock()
}

// reset forgets what was recorded.
func (l *stmtLog) reset() {
	l.mu.Lock()
	l.stmts, l.txs = nil, 0
	l.mu.Unlock()
}

// taken returns what was recorded since the last reset.
func (l *stmtLog) taken() ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.stmts...), l.txs
}

// countingConnector opens connections of the SQLite driver that record
// each statement they run in log.
type countingConnector struct {
	drv driver.Driver
	dsn string
	log *stmtLog
}

func (c *countingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, log: c.log}, nil
}

func (c *countingConnector) Driver() driver.Driver { return c.drv }

type countingConn struct {
	driver.Conn
	log *stmtLog
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: s, query: query, log: c.log}, nil
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.log.began()
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.log.ran(query); err != nil {
		return nil, err
	}
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.log.ran(query); err != nil {
		return nil, err
	}
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *countingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

type countingStmt struct {
	driver.Stmt
	query string
	log   *stmtLog
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.log.ran(s.query); err != nil {
		return nil, err
	}
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := s.log.ran(s.query); err != nil {
		return nil, err
	}
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

// countingEnv is newEnv on an SQLite database whose statements are
// recorded in the returned log.
func countingEnv(t *testing.T) (*testEnv, *stmtLog) {
	t.Helper()
	probe, err := sql.Open("sqlite", "")
	if err != nil {
		t.Fatal(err)
	}
	drv := probe.Driver()
	probe.Close()
	path := filepath.Join(t.TempDir(), "npcd.db")
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate&_time_format=sqlite"
	log := &stmtLog{}
	pool := sql.OpenDB(&countingConnector{drv: drv, dsn: dsn, log: log})
	pool.SetMaxOpenConns(2) // SQLite writers queue for its lock (busy_timeout), and statements are prepared on the other connection, as in the daemon
	db, err := gorm.Open(gormsqlite.New(gormsqlite.Config{Conn: pool}), &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	if err := store.Migrate(context.Background(), db, schema.Migrations()); err != nil {
		t.Fatal(err)
	}
	return envOnDB(t, db, path, nil, 0, nil), log
}

// An idle tick runs one statement, the glance at the NPC's counters and
// inbox, and opens no transaction: the commonest request of a large world
// must not grow a query unnoticed.
func TestIdleTickRunsOneStatement(t *testing.T) {
	env, log := countingEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: "Good morning, Brom."}}); err != nil {
		t.Fatal(err)
	}
	if res, err := env.eng.Tick(ctx, "brom"); err != nil || res.Idle {
		t.Fatal(res, err)
	}
	for i := 0; i < 3; i++ {
		log.reset()
		res, err := env.eng.Tick(ctx, "brom")
		if err != nil || !res.Idle {
			t.Fatal(res, err)
		}
		stmts, txs := log.taken()
		if len(stmts) != 1 || txs != 0 || !strings.Contains(stmts[0], glanceFrom) || strings.Contains(stmts[0], eventsWithGlance) {
			t.Fatalf("idle tick %d ran %d statements in %d transactions, want only the glance, without its events' part:\n%s", i, len(stmts), txs, strings.Join(stmts, "\n"))
		}
	}
}

// An idle tick under an idempotency key adds only what the key needs: the
// look for an answer stored under it before the glance, and the answer's
// row after. Asked again, the key's answer is read and nothing else.
func TestKeyedIdleTickStatements(t *testing.T) {
	env, log := countingEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	want := []string{"FROM `tick_outcomes`", glanceFrom, "INSERT INTO `tick_outcomes`"}
	for i, key := range []string{"k1", "k1"} {
		log.reset()
		res, err := env.eng.TickWithKey(ctx, "brom", key)
		if err != nil || !res.Idle {
			t.Fatal(res, err)
		}
		stmts, txs := log.taken()
		if i == 1 {
			want = want[:1] // the stored answer
		}
		ok := len(stmts) == len(want) && txs == 0
		for j := 0; ok && j < len(want); j++ {
			ok = strings.Contains(stmts[j], want[j])
		}
		if !ok {
			t.Fatalf("keyed idle tick %d ran %d statements in %d transactions, want %q:\n%s", i, len(stmts), txs, want, strings.Join(stmts, "\n"))
		}
	}
}

// glanceFrom is a piece of the glance's statement text.
const glanceFrom = "FROM characters, (SELECT EXISTS"

// pendingFrom is a piece of the statement that reads pending events on
// their own, and eventsWithGlance one of the glance that reads them too.
const (
	pendingFrom      = "FROM events WHERE character_id = ? AND consumed_at IS NULL ORDER BY seq"
	eventsWithGlance = "UNION ALL SELECT"
)

// A tick that goes on reads the NPC's row once: the glance reads the whole
// state when an event waits, and no State read follows. The events posted
// through the engine are read with it, in the same statement.
func TestBusyTickReadsTheNPCsRowOnce(t *testing.T) {
	env, log := countingEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: fmt.Sprintf("Good morning %d, Brom.", i)}}); err != nil {
			t.Fatal(err)
		}
		log.reset()
		res, err := env.eng.Tick(ctx, "brom")
		if err != nil || res.Idle {
			t.Fatal(res, err)
		}
		stmts, _ := log.taken()
		var reads []string
		for _, s := range stmts {
			if strings.HasPrefix(strings.TrimSpace(s), "SELECT") && strings.Contains(s, "FROM characters") && strings.Contains(s, "sleep_mark") {
				reads = append(reads, s)
			}
		}
		if len(reads) != 1 || !strings.Contains(reads[0], glanceFrom) {
			t.Fatalf("tick %d read the NPC's state %d times, want only in the glance:\n%s", i, len(reads), strings.Join(reads, "\n"))
		}
		if !strings.Contains(reads[0], eventsWithGlance) || slices.ContainsFunc(stmts, func(s string) bool { return strings.Contains(s, pendingFrom) }) {
			t.Fatalf("tick %d read its events apart from its glance:\n%s", i, strings.Join(stmts, "\n"))
		}
		if res.Events != 1 {
			t.Fatalf("tick %d consumed %d events, want 1", i, res.Events)
		}
	}
}

// Events stored without this engine (by another daemon sharing the
// database) are read after the glance that finds them waiting, and
// answered; events posted through it, with the glance.
func TestTickReadsEventsStoredElsewhere(t *testing.T) {
	env, log := countingEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	for i, elsewhere := range []bool{true, false, true} {
		text := fmt.Sprintf("Brom, I need nails, %d of them.", i+2)
		if elsewhere {
			if _, _, err := env.chars.AddEvents(ctx, "brom", []character.Event{{Kind: "say", Actor: "alice", Text: text, At: at}}, 0); err != nil {
				t.Fatal(err)
			}
		} else if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: text, At: at}}); err != nil {
			t.Fatal(err)
		}
		log.reset()
		res, err := env.eng.Tick(ctx, "brom")
		if err != nil || res.Idle || res.Events != 1 {
			t.Fatalf("tick %d: %+v, %v; want the event answered", i, res, err)
		}
		stmts, _ := log.taken()
		glance := slices.IndexFunc(stmts, func(s string) bool { return strings.Contains(s, glanceFrom) })
		apart := slices.IndexFunc(stmts, func(s string) bool { return strings.Contains(s, pendingFrom) })
		if glance < 0 || strings.Contains(stmts[glance], eventsWithGlance) == elsewhere || (apart > glance) != elsewhere {
			t.Fatalf("tick %d (stored elsewhere: %v) read:\n%s", i, elsewhere, strings.Join(stmts, "\n"))
		}
		live, err := env.chars.LiveMessages(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(live, func(m character.Message) bool { return m.Role == "user" && strings.Contains(m.Content, text) }) {
			t.Fatalf("tick %d: no message of the live history holds %q", i, text)
		}
	}
}

// newMessagesFrom is a piece of the statement the search index reads new
// messages with.
const newMessagesFrom = "FROM messages WHERE character_id = ? AND state IN"

// marksFrom is a piece of the statement a search reads an NPC's marks and
// new journal entries with.
const marksFrom = "FROM (SELECT 1 AS one) AS one LEFT JOIN characters"

// keptAsBuilt fails t unless, for each query, brom's search index as the
// engine keeps it finds something, and what an index built from the
// database finds; it returns what it found.
func keptAsBuilt(t *testing.T, env *testEnv, queries ...string) [][]journal.Result {
	t.Helper()
	ctx := context.Background()
	ret := env.eng.deps.Retriever.(*journal.Retriever)
	fresh, err := journal.NewRetriever(env.jour)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]journal.Result
	for _, q := range queries {
		kept, err := ret.Search(ctx, "brom", q, 8)
		if err != nil {
			t.Fatal(err)
		}
		built, err := fresh.Search(ctx, "brom", q, 8)
		if err != nil {
			t.Fatal(err)
		}
		if len(kept) == 0 || !reflect.DeepEqual(kept, built) {
			t.Fatalf("%q: the index kept by the ticks finds\n%+v\nthe index built from the database\n%+v", q, kept, built)
		}
		out = append(out, kept)
	}
	return out
}

// A tick's search reads nothing back when the NPC's index holds what the
// glance found: the messages and journal entries a tick writes go into the
// index as it commits them, and the first tick alone builds it from the
// database. the journal entries a tick writes go into the index as it
// commits them, like its messages. Rows written by others (an entry, a
// memory) are read at the next search. Either way the index ranks like one
// built from the database.
func TestRecallReadsBackOnlyWhatOthersWrote(t *testing.T) {
	env, log := countingEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	lines := []string{"I owe the ferryman four silver crowns, and I must pay him by the new moon!",
		"My name is Wren and I map the hills; my sister Ilsa vanished at Kestrel Hollow.",
		"Please, Brom, forge me a blade: the wolves took three sheep from my father's farm.",
		"I promise to bring you twelve iron bars from the mine at Greyhold before winter."}
	tick := func(i int, text string) []string {
		t.Helper()
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "wren", Text: text}}); err != nil {
			t.Fatal(err)
		}
		log.reset()
		if res, err := env.eng.Tick(ctx, "brom"); err != nil || res.Idle {
			t.Fatal(i, res, err)
		}
		stmts, _ := log.taken()
		return stmts
	}
	reads := func(stmts []string, piece string) int {
		n := 0
		for _, s := range stmts {
			if strings.Contains(s, piece) {
				n++
			}
		}
		return n
	}
	for i, text := range lines {
		stmts := tick(i, text)
		// The first tick builds the index; the others find it at the
		// marks of their glance.
		if want := min(i, 1) ^ 1; reads(stmts, marksFrom) != want || reads(stmts, newMessagesFrom) != want {
			t.Fatalf("tick %d read the marks %d times and new messages %d times, want %d and %d:\n%s", i,
				reads(stmts, marksFrom), reads(stmts, newMessagesFrom), want, want, strings.Join(stmts, "\n"))
		}
	}
	written, err := env.jour.List(ctx, "brom", journal.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(written) < len(lines) {
		t.Fatalf("the ticks wrote %d journal entries, want at least %d to search", len(written), len(lines))
	}
	for i, kept := range keptAsBuilt(t, env, "ferryman crowns", "Ilsa Kestrel Hollow", "wolves sheep farm", "iron bars Greyhold") {
		if !slices.ContainsFunc(kept, func(r journal.Result) bool { return r.Kind == journal.KindJournal || len(r.Sources.JournalIDs) > 0 }) {
			t.Fatalf("query %d finds no journal entry, not even folded into a message: %+v", i, kept)
		}
	}

	// Written by others between two ticks: the next one reads them.
	if err := env.jour.Add(ctx, "brom", &journal.Entry{Type: journal.TypeObservation, Content: "Wren's lantern was found broken at the mill.", Importance: 7}); err != nil {
		t.Fatal(err)
	}
	stmts := tick(len(lines), "Have you heard any news from the mill?")
	if reads(stmts, marksFrom) != 1 {
		t.Fatalf("after an entry written by another, the tick read the marks %d times, want 1:\n%s", reads(stmts, marksFrom), strings.Join(stmts, "\n"))
	}
	if _, err := env.jour.AddMemory(ctx, "brom", &journal.Memory{Content: "Wren fears the miller's dog.", Importance: 6}); err != nil {
		t.Fatal(err)
	}
	stmts = tick(len(lines)+1, "The miller's dog barked at me again.")
	if reads(stmts, marksFrom) != 1 {
		t.Fatalf("after a memory written by another, the tick read the marks %d times, want 1:\n%s", reads(stmts, marksFrom), strings.Join(stmts, "\n"))
	}
	keptAsBuilt(t, env, "lantern mill", "miller dog", "ferryman crowns")
}

// A tick that compacts before its model call has moved the NPC's history
// since its glance: its search reads the marks anew instead of trusting
// the glance's, and finds what an index built from the database finds.
func TestRecallAfterACompactionInTheTickReadsTheMarks(t *testing.T) {
	env, log := countingEnv(t)
	env.eng.cfg.BackgroundCompaction = false // every compaction in a tick
	ctx := context.Background()
	npc := brom()
	npc.ContextWindow = 3072
	if _, err := env.eng.PutNPC(ctx, npc); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i == 60 {
			t.Fatal("no tick compacted")
		}
		text := fmt.Sprintf("Tale %d of the ferryman: %s", i, longTale[:200+i%7*40])
		if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "wren", Text: text}}); err != nil {
			t.Fatal(err)
		}
		log.reset()
		res, err := env.eng.Tick(ctx, "brom")
		if err != nil || res.Idle {
			t.Fatal(i, res, err)
		}
		if res.Compaction == nil {
			continue
		}
		stmts, _ := log.taken()
		if !slices.ContainsFunc(stmts, func(s string) bool { return strings.Contains(s, marksFrom) }) {
			t.Fatalf("tick %d compacted and searched at the marks of its glance:\n%s", i, strings.Join(stmts, "\n"))
		}
		break
	}
	keptAsBuilt(t, env, "ferryman tale", "wolves bridge ford")
}

// archiveByList is a piece of the statement that archives a list of
// messages, whose text is parsed anew for every length of the list, and
// archiveByRange one of the statement that archives a range of them.
const (
	archiveByList  = "UPDATE messages SET state = ?, compaction_id = ? WHERE character_id = ? AND state = ? AND id IN"
	archiveByRange = "UPDATE messages SET state = ?, compaction_id = ? WHERE character_id = ? AND state = ? AND id BETWEEN"
)

// A compaction archives its span by its range, also when the span holds
// the summary of the compaction before, which is newer than the messages
// after it: every compaction of an NPC but its first.
func TestCompactionsArchiveTheirSpanByItsRange(t *testing.T) {
	env, log := countingEnv(t)
	ctx := context.Background()
	c := brom()
	c.ContextWindow, c.MaxOutputTokens = 2048, 192
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	var summaries []int64
	for c := 0; c < 3; c++ {
		for i := 0; i < 4; i++ {
			tickOnce(t, env, fmt.Sprintf("Compaction %d, round %d: the miller's cart lost a wheel on the north road again. ", c, i)+strings.Repeat("The wolves howled all night by the mill. ", 6))
		}
		log.reset()
		rec, err := env.eng.Compact(ctx, "brom", "")
		if err != nil || rec == nil {
			t.Fatalf("compaction %d: %+v, %v", c, rec, err)
		}
		stmts, _ := log.taken()
		byRange := 0
		for _, s := range stmts {
			if strings.Contains(s, archiveByList) {
				t.Fatalf("compaction %d archived its span by a list of ids:\n%s", c, s)
			}
			if strings.Contains(s, archiveByRange) {
				byRange++
			}
		}
		if byRange != 1 {
			t.Fatalf("compaction %d ran the archive by range %d times, want once:\n%s", c, byRange, strings.Join(stmts, "\n"))
		}
		summaries = append(summaries, rec.SummaryMessageID)
	}
	// The later compactions did archive the summary before them.
	for _, id := range summaries[:len(summaries)-1] {
		m, err := env.chars.MessageByID(ctx, "brom", id)
		if err != nil {
			t.Fatal(err)
		}
		if m.State != character.StateArchived {
			t.Fatalf("summary %d is %s after the next compaction, want archived", id, m.State)
		}
	}
}
