package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// ErrWriteWait is a write that waited too long for its turn at an SQLite
// database's single writer.
var ErrWriteWait = errors.New("store: timed out waiting to write")

// SQLite has one writer at a time. Left to itself, a writer that finds the
// database locked sleeps in SQLite's busy handler (1, 2, 5 … 100 ms at a
// time) and retries, so under load writers sleep while the lock is free,
// come in no particular order, and the unlucky ones fail with "database is
// locked" once their busy timeout is spent. A writeGate queues the writers
// of one process in Go instead: a transaction (every SQLite transaction
// npcd opens is BEGIN IMMEDIATE, a writer) takes the gate before BEGIN and
// gives it back at COMMIT or ROLLBACK, and a write statement outside a
// transaction holds it while it runs. Waiters go through in the order they
// came, and the next one starts the moment the gate is free. Reads outside
// transactions never take it: in WAL mode they do not wait for the writer.
// The busy handler still settles what the gate cannot see: other processes
// sharing the file.
//
// The gate also checkpoints the write-ahead log. SQLite's automatic
// checkpoint runs inside the commit that finds the log past 1,000 pages,
// and every writer queued behind that commit waits for it (a tick's p99
// grew by milliseconds); the pools npcd opens turn it off
// (wal_autocheckpoint(0)), and every CheckpointEvery writes the gate
// starts a checkpoint on a connection of its own (checkpointLog): the bulk
// of the copying runs beside the writers, and only a short last pass holds
// the gate. At most one runs at a time.
type writeGate struct {
	turn chan struct{} // holds a token while a writer has the gate
	wait time.Duration // the longest a writer waits for its turn
	// checkpoint, when set, runs a checkpoint; writes counts the
	// writes since the last one was started (guarded by the gate: only
	// the writer holding it counts); running is set while one runs.
	checkpoint func()
	writes     int
	running    atomic.Bool
	// restarts counts the checkpoints after which the log is started over.
	restarts atomic.Int64
	// held and waited add up the time (in nanoseconds) writers held the
	// gate and waited for it; ckptHeld is the part of held that the
	// checkpoints' second passes took.
	held, waited, ckptHeld atomic.Int64
	// presyncs counts the database syncs run before a second pass.
	presyncs atomic.Int64
	// readersBusy, when set (by tests), is called each time the second
	// pass of a checkpoint finds readers still reading the log.
	readersBusy func()
	// bg counts the checkpoints running in the background, which the
	// pool's Close waits for (closeGate), so that none touches the files
	// once it returns; closed, under bgMu, stops new ones.
	bgMu   sync.Mutex
	bg     sync.WaitGroup
	closed bool
}

// CheckpointEvery is how many writes (transactions, or write statements
// outside one) of an SQLite pool start a checkpoint of its write-ahead
// log (checkpointLog). Every pass that copies frames first syncs the log
// (SQLite does, synchronous=NORMAL), beside the writers appending to it,
// and copies again the pages they wrote since the last pass: the pages a
// world writes most (the ends of its tables, its NPCs' rows) are in
// every pass. A world of 1,000 NPCs ticking flat out on 2 cores, 32
// ticks at once, ran about 4% more ticks a second at 64 writes than at
// 16 (the median of 16 alternated pairs, 14 of them ahead), its log
// 27 MiB on average instead of 19.
const CheckpointEvery = 64

func newWriteGate(wait time.Duration) *writeGate {
	return &writeGate{turn: make(chan struct{}, 1), wait: wait}
}

// wrote counts a write, by the writer holding the gate, and starts a
// checkpoint in the background every CheckpointEvery writes unless one
// still runs.
func (g *writeGate) wrote() {
	if g.checkpoint == nil {
		return
	}
	if g.writes++; g.writes < CheckpointEvery || !g.running.CompareAndSwap(false, true) {
		return
	}
	g.writes = 0
	g.bgMu.Lock()
	defer g.bgMu.Unlock()
	if g.closed {
		g.running.Store(false)
		return
	}
	g.bg.Add(1)
	go func() {
		defer g.bg.Done()
		defer g.running.Store(false)
		g.checkpoint()
	}()
}

// closeGate stops new background checkpoints and waits for the running
// one, if any.
func (g *writeGate) closeGate() {
	g.bgMu.Lock()
	g.closed = true
	g.bgMu.Unlock()
	g.bg.Wait()
}

// acquire waits for the gate, for ctx to end or for g.wait to pass, and
// returns the function that gives the gate back (safe to call twice) and
// counts the write.
func (g *writeGate) acquire(ctx context.Context) (release func(), err error) {
	if err := g.take(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.wrote()
			g.held.Add(int64(time.Since(start)))
			<-g.turn
		})
	}, nil
}

// take waits for the gate, for ctx to end or for g.wait to pass; the
// caller gives it back with <-g.turn.
func (g *writeGate) take(ctx context.Context) error {
	select {
	case g.turn <- struct{}{}:
	default:
		start := time.Now()
		defer func() { g.waited.Add(int64(time.Since(start))) }()
		t := time.NewTimer(g.wait)
		defer t.Stop()
		select {
		case g.turn <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return fmt.Errorf("%w: waited %s for the other writers of the database", ErrWriteWait, g.wait)
		}
	}
	return nil
}

// writes reports whether an SQL statement run outside a transaction may
// write, and so must hold the gate: anything but a read. A statement this
// cannot tell is taken for a write: serializing a read costs a little
// time, while a write outside the gate would only fall back to SQLite's
// busy handler.
func writes(query string) bool {
	q := skipSpaceAndComments(query)
	end := strings.IndexFunc(q, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_') })
	if end < 0 {
		end = len(q)
	}
	switch strings.ToUpper(q[:end]) {
	case "SELECT", "VALUES", "EXPLAIN":
		return false
	case "PRAGMA":
		// A checkpoint takes the write lock, but a passive one, which
		// waits for no writer; other pragmas npcd runs outside
		// transactions read or set connection state.
		l := strings.ToLower(q)
		return strings.Contains(l, "wal_checkpoint") && !strings.Contains(l, "passive")
	case "WITH":
		u := strings.ToUpper(q)
		for _, w := range []string{"INSERT", "UPDATE", "DELETE", "REPLACE"} {
			if strings.Contains(u, w) {
				return true
			}
		}
		return false
	}
	return true
}

// skipSpaceAndComments returns q without its leading blanks, "--" line
// comments and "/* */" comments.
func skipSpaceAndComments(q string) string {
	for {
		q = strings.TrimLeft(q, " \t\r\n(")
		switch {
		case strings.HasPrefix(q, "--"):
			i := strings.IndexByte(q, '\n')
			if i < 0 {
				return ""
			}
			q = q[i+1:]
		case strings.HasPrefix(q, "/*"):
			i := strings.Index(q, "*/")
			if i < 0 {
				return ""
			}
			q = q[i+2:]
		default:
			return q
		}
	}
}

// gatedConnector opens connections of an SQLite driver whose writes go
// through gate.
type gatedConnector struct {
	drv  driver.Driver
	dsn  string
	gate *writeGate
	db   *sql.DB // the pool it opens connections of
}

func (c *gatedConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	file, err := mainFile(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	if file != "" {
		openedFile(file)
	}
	return &gatedConn{inner: conn, gate: c.gate, file: file}, nil
}

func (c *gatedConnector) Driver() driver.Driver { return c.drv }

// Close is called by the pool's Close once its idle connections are
// closed: it waits for the gate's background checkpoint, whose connection
// is closed as it ends, so that nothing touches the database's files
// afterwards (a test's directory can then be removed).
func (c *gatedConnector) Close() error {
	c.gate.closeGate()
	gates.Delete(c.db)
	return nil
}

// gates maps each SQLite pool npcd opened (*sql.DB) to its gate, for
// Writers.
var gates sync.Map

// WriterStats is what the writers of an SQLite database did in this
// process: the time its one writer was held by this process's
// transactions, writes and checkpoint passes (Held: its growth over a
// span of time, near that span, says the writer is what the ticks wait
// for), the time writers spent waiting for their turn (Waited, summed
// over writers, the checkpoints' passes included), the part of Held the
// background checkpoints' second passes took (CheckpointHeld), and how
// many of these started the write-ahead log over (Restarts).
type WriterStats struct {
	Held, Waited, CheckpointHeld time.Duration
	Restarts                     int64
}

// Writers returns the WriterStats of db, and false when db is not an
// SQLite pool npcd opened (PostgreSQL has no single writer).
func Writers(db *gorm.DB) (WriterStats, bool) {
	sqlDB, err := db.DB()
	if err != nil {
		return WriterStats{}, false
	}
	v, ok := gates.Load(sqlDB)
	if !ok {
		return WriterStats{}, false
	}
	g := v.(*writeGate)
	return WriterStats{Held: time.Duration(g.held.Load()), Waited: time.Duration(g.waited.Load()),
		CheckpointHeld: time.Duration(g.ckptHeld.Load()), Restarts: g.restarts.Load()}, true
}

// openGated opens an SQLite pool (driver name drv, as registered) whose
// writers in this process queue at one gate, waiting at most wait each.
func openGated(drv, dsn string, wait time.Duration) (*sql.DB, error) {
	db, _, err := openGate(drv, dsn, wait)
	return db, err
}

// openGate is openGated, returning the pool's gate too.
func openGate(drv, dsn string, wait time.Duration) (*sql.DB, *writeGate, error) {
	probe, err := sql.Open(drv, dsn) // connects to nothing: only names the driver
	if err != nil {
		return nil, nil, err
	}
	d := probe.Driver()
	probe.Close()
	gate := newWriteGate(wait)
	conn := &gatedConnector{drv: d, dsn: dsn, gate: gate}
	db := sql.OpenDB(conn)
	conn.db = db
	gate.checkpoint = func() { gate.checkpointLog(db) }
	gates.Store(db, gate)
	return db, gate, nil
}

// checkpointLog checkpoints db's write-ahead log in two passes. The first
// copies what the log holds without the gate, while writers go on
// appending. Once the log holds restartFrames pages, the second copies
// what they appended, holding the gate so that nothing more is: a short
// pass, after which the whole log is in the database and the next writer
// starts it over from its beginning. Without it, under a steady load a
// checkpoint would never catch up with the writers and the log would grow
// without end (SQLite reuses it only once every frame has been copied).
// Between the two, the database file is synced beside the writers
// (syncDB), so that the second pass has only its own few pages to flush
// while it holds them. Errors are left to the next checkpoint: a pool
// closed meanwhile, a checkpoint another process runs.
func (g *writeGate) checkpointLog(db *sql.DB) {
	ctx := context.Background()
	// The connection is taken before the gate: taken after, it could wait
	// for one held by a writer that waits for the gate.
	conn, err := db.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	var busy, logged, copied int
	err = conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logged, &copied)
	if err != nil || logged < restartFrames {
		return
	}
	// What this pass copied is flushed now, beside the writers, not in
	// the pass that holds them (see syncDB).
	if syncConnDB(conn) {
		g.presyncs.Add(1)
	}
	// Not acquire: this pass is no write to count.
	if g.take(ctx) != nil {
		return
	}
	start := time.Now()
	defer func() {
		d := int64(time.Since(start))
		g.held.Add(d)
		g.ckptHeld.Add(d)
		<-g.turn
	}()
	ctx = context.WithValue(ctx, gateHeld{}, true)
	// RESTART also needs the readers still reading the log gone (readers
	// that begin once it is copied read the database alone), so that the
	// next writer can start the log over. It is tried again every
	// restartPoll, for restartWait at most, since writers wait meanwhile:
	// SQLite's own busy handler would sleep 1, 2, 5 then 10 ms between
	// tries, holding the writers for milliseconds after the last reader
	// left.
	restore, err := busyFor(ctx, conn, 0)
	if err != nil {
		return
	}
	defer restore()
	deadline := time.Now().Add(restartWait)
	for {
		if conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &logged, &copied) != nil {
			return
		}
		if busy == 0 {
			g.restarts.Add(1)
			return
		}
		if !time.Now().Before(deadline) {
			return
		}
		if g.readersBusy != nil {
			g.readersBusy()
		}
		time.Sleep(restartPoll)
	}
}

// restartPoll is how often the second pass of a background checkpoint
// tries again to start the log over while readers still read it.
const restartPoll = 50 * time.Microsecond

// gateHeld marks the context of a statement run by the holder of the gate
// (a checkpoint's second pass), which must not wait for it again.
type gateHeld struct{}

// restartFrames is the size, in frames (pages), from which a checkpoint's
// second pass starts the log over: below it the log is left to grow,
// and writers are not held. A second pass holds the writers for about
// the same time whatever the log holds (it syncs the log and the database
// files, and copies only what was appended since the first pass), so a
// larger log holds them less in all. In a world of 1,000 NPCs ticking,
// 4,096 pages (16 MiB) held them half as long as 1,000 pages did at 24
// ticks each, and a third less at 80.
const restartFrames = 4096

// restartWait is the most the second pass of a background checkpoint waits
// for readers of the log.
const restartWait = 20 * time.Millisecond

// gatedConn is a connection whose transactions and writes hold the gate.
// database/sql uses a connection from one goroutine at a time.
type gatedConn struct {
	inner driver.Conn
	gate  *writeGate
	inTx  bool   // a transaction of this connection holds the gate
	file  string // the database file (see dbFiles), "" for none
}

var (
	_ driver.Conn               = (*gatedConn)(nil)
	_ driver.ConnBeginTx        = (*gatedConn)(nil)
	_ driver.ConnPrepareContext = (*gatedConn)(nil)
	_ driver.ExecerContext      = (*gatedConn)(nil)
	_ driver.QueryerContext     = (*gatedConn)(nil)
	_ driver.Pinger             = (*gatedConn)(nil)
	_ driver.SessionResetter    = (*gatedConn)(nil)
	_ driver.Validator          = (*gatedConn)(nil)
)

func (c *gatedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *gatedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var (
		s   driver.Stmt
		err error
	)
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		s, err = p.PrepareContext(ctx, query)
	} else {
		s, err = c.inner.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &gatedStmt{inner: s, conn: c, write: writes(query)}, nil
}

func (c *gatedConn) Close() error {
	err := c.inner.Close()
	if c.file != "" {
		// After SQLite's own close: the file's descriptor may go with it.
		err = errors.Join(err, closedFile(c.file))
	}
	return err
}

func (c *gatedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *gatedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	release, err := c.gate.acquire(ctx)
	if err != nil {
		return nil, err
	}
	var tx driver.Tx
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(ctx, opts)
	} else {
		tx, err = c.inner.Begin() //nolint:staticcheck // the driver has nothing else
	}
	if err != nil {
		release()
		return nil, err
	}
	c.inTx = true
	return &gatedTx{inner: tx, done: func() { c.inTx = false; release() }}, nil
}

// enter takes the gate for a statement run outside a transaction, when it
// writes; the function it returns gives it back.
func (c *gatedConn) enter(ctx context.Context, write bool) (func(), error) {
	if c.inTx || !write || ctx.Value(gateHeld{}) != nil {
		return func() {}, nil
	}
	return c.gate.acquire(ctx)
}

func (c *gatedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.inner.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	release, err := c.enter(ctx, writes(query))
	if err != nil {
		return nil, err
	}
	defer release()
	return e.ExecContext(ctx, query, args)
}

func (c *gatedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.inner.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	release, err := c.enter(ctx, writes(query))
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, query, args)
	return gated(rows, err, release)
}

func (c *gatedConn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *gatedConn) ResetSession(ctx context.Context) error {
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *gatedConn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// gatedTx gives the gate back when the transaction ends.
type gatedTx struct {
	inner driver.Tx
	done  func()
}

func (t *gatedTx) Commit() error {
	defer t.done()
	return t.inner.Commit()
}

func (t *gatedTx) Rollback() error {
	defer t.done()
	return t.inner.Rollback()
}

// gatedStmt is a prepared statement whose writes outside a transaction
// hold the gate.
type gatedStmt struct {
	inner driver.Stmt
	conn  *gatedConn
	write bool
}

func (s *gatedStmt) Close() error  { return s.inner.Close() }
func (s *gatedStmt) NumInput() int { return s.inner.NumInput() }

// Exec and Query are the calls of drivers without contexts; database/sql
// uses the context forms, which gatedStmt has.
func (s *gatedStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *gatedStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *gatedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	release, err := s.conn.enter(ctx, s.write)
	if err != nil {
		return nil, err
	}
	defer release()
	if e, ok := s.inner.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	vs, err := values(args)
	if err != nil {
		return nil, err
	}
	return s.inner.Exec(vs) //nolint:staticcheck // the fallback database/sql itself uses
}

func (s *gatedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	release, err := s.conn.enter(ctx, s.write)
	if err != nil {
		return nil, err
	}
	var rows driver.Rows
	if q, ok := s.inner.(driver.StmtQueryContext); ok {
		rows, err = q.QueryContext(ctx, args)
	} else if vs, verr := values(args); verr != nil {
		err = verr
	} else {
		rows, err = s.inner.Query(vs) //nolint:staticcheck // the fallback database/sql itself uses
	}
	return gated(rows, err, release)
}

// gated returns rows holding the gate until they are closed, or gives the
// gate back when the query failed.
func gated(rows driver.Rows, err error, release func()) (driver.Rows, error) {
	if err != nil {
		release()
		return nil, err
	}
	return &gatedRows{Rows: rows, release: release}, nil
}

func named(vs []driver.Value) []driver.NamedValue {
	args := make([]driver.NamedValue, len(vs))
	for i, v := range vs {
		args[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return args
}

func values(args []driver.NamedValue) ([]driver.Value, error) {
	vs := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, errors.New("store: named arguments are not supported")
		}
		vs[i] = a.Value
	}
	return vs, nil
}

// gatedRows holds the gate until the rows of a write (INSERT … RETURNING)
// are closed: the statement's implicit transaction ends with it. It passes
// on the column type information database/sql asks drivers' rows for.
type gatedRows struct {
	driver.Rows
	release func()
}

func (r *gatedRows) Close() error {
	defer r.release()
	return r.Rows.Close()
}

func (r *gatedRows) ColumnTypeDatabaseTypeName(i int) string {
	if c, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return c.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *gatedRows) ColumnTypeLength(i int) (int64, bool) {
	if c, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return c.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *gatedRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if c, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return c.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *gatedRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if c, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return c.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

func (r *gatedRows) ColumnTypeScanType(i int) reflect.Type {
	if c, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return c.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}
