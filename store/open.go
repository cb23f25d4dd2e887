package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	// The pure-Go SQLite driver registers itself as "sqlite"; it has FTS5
	// built in, so no cgo or build tags are needed.
	_ "modernc.org/sqlite"
)

// Drivers accepted by Open.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Options tune Open. The zero value is the embedded default.
type Options struct {
	// Driver is DriverSQLite (default) or DriverPostgres.
	Driver string
	// ReadOnly opens an SQLite file without write access, safe to use while a
	// daemon writes the same file (WAL readers never block the writer).
	ReadOnly bool
	// BusyTimeout is how long an SQLite statement waits for a lock; default 5s.
	BusyTimeout time.Duration
	// MaxOpenConns bounds the connection pool; default 8 for SQLite, 16 for PostgreSQL.
	MaxOpenConns int
	// WriteWait is the longest an SQLite write waits for the other writers
	// of this process, which queue in order (see writeGate); default 30s.
	// Past it the write fails with ErrWriteWait. Other processes writing
	// the same file are waited for by BusyTimeout.
	WriteWait time.Duration
}

// Open connects to the database named by dsn: for SQLite a file path (":memory:"
// is refused, npcd's state must be durable), for PostgreSQL a libpq DSN or URL.
// The caller closes it with Close.
func Open(ctx context.Context, dsn string, opt Options) (*gorm.DB, error) {
	cfg := &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true, // npcd opens its own transactions where it needs them
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
	var (
		db  *gorm.DB
		err error
	)
	switch opt.Driver {
	case "", DriverSQLite:
		if inMemory(dsn) {
			return nil, fmt.Errorf("store: sqlite needs a file path, got %q", dsn)
		}
		if opt.ReadOnly {
			db, err = gorm.Open(sqlite.New(sqlite.Config{DriverName: "sqlite", DSN: sqliteDSN(dsn, opt)}), cfg)
			break
		}
		wait := opt.WriteWait
		if wait <= 0 {
			wait = 30 * time.Second
		}
		pool, perr := openGated("sqlite", sqliteDSN(dsn, opt), wait)
		if perr != nil {
			return nil, fmt.Errorf("store: open: %w", perr)
		}
		if db, err = gorm.Open(sqlite.New(sqlite.Config{Conn: pool}), cfg); err != nil {
			pool.Close()
		}
	case DriverPostgres:
		db, err = gorm.Open(postgres.Open(dsn), cfg)
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownDriver, opt.Driver)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	maxOpen := opt.MaxOpenConns
	if maxOpen <= 0 {
		maxOpen = 8
		if opt.Driver == DriverPostgres {
			maxOpen = 16
		}
	}
	sqlDB.SetMaxOpenConns(maxOpen)
	sqlDB.SetMaxIdleConns(maxOpen)
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("store: ping: %w", err)
	}
	return db, nil
}

// sqliteDSN builds the modernc DSN: WAL, a busy timeout, foreign keys, and
// BEGIN IMMEDIATE for transactions, so a transaction that will write takes
// the write lock up front instead of failing with SQLITE_BUSY when it upgrades
// from a read.
func sqliteDSN(path string, opt Options) string {
	busy := opt.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	// Statement journals (an UPDATE of many rows inside a transaction
	// keeps one) and temporary sorts stay in memory instead of temporary
	// files opened, written and removed at each statement.
	q.Add("_pragma", "temp_store(MEMORY)")
	if opt.ReadOnly {
		q.Set("mode", "ro")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		// The write gate checkpoints in the background instead (see
		// writeGate).
		q.Add("_pragma", "wal_autocheckpoint(0)")
		// A WAL that grew while readers kept checkpoints from finishing is
		// cut back to this size once a checkpoint resets it.
		q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", WALSizeLimit))
		q.Set("_txlock", "immediate")
	}
	q.Set("_time_format", "sqlite")
	p := path
	if !strings.HasPrefix(p, "file:") {
		p = "file:" + p
	}
	sep := "?"
	if strings.Contains(p, "?") { // a file: URI with its own parameters
		sep = "&"
	}
	return p + sep + q.Encode()
}

// WALSizeLimit is the size an SQLite write-ahead log is cut back to after a
// checkpoint that resets it (journal_size_limit).
const WALSizeLimit = 64 << 20

// Checkpoint copies every page of an SQLite write-ahead log into the
// database and truncates the log to zero bytes (wal_checkpoint(TRUNCATE)),
// after a first pass that copies it, and syncs the database, beside the
// writers.
// Automatic checkpoints never shrink the file and cannot finish while
// readers are active, so under steady load the log only grows; the daemon
// calls this now and then. It waits up to wait for active readers and
// writers (holding the write lock meanwhile, so writers wait too); done is
// false when some were still active and the log was not truncated (the next
// call tries again). On PostgreSQL it does nothing.
func Checkpoint(ctx context.Context, db *gorm.DB, wait time.Duration) (done bool, err error) {
	if !IsSQLite(db) {
		return true, nil
	}
	sqlDB, err := db.DB()
	if err != nil {
		return false, fmt.Errorf("store: checkpoint: %w", err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("store: checkpoint: %w", err)
	}
	defer conn.Close()
	restore, err := busyFor(ctx, conn, wait)
	if err != nil {
		return false, fmt.Errorf("store: checkpoint: %w", err)
	}
	defer restore()
	var busy, logPages, checkpointed int
	// The log is copied, and the database synced, beside the writers
	// first: TRUNCATE holds them, and then copies and syncs only what
	// they appended meanwhile (see syncDB).
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &checkpointed); err != nil {
		return false, fmt.Errorf("store: checkpoint: %w", err)
	}
	syncConnDB(conn)
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &checkpointed); err != nil {
		return false, fmt.Errorf("store: checkpoint: %w", err)
	}
	return busy == 0, nil
}

// busyFor sets conn's busy timeout to wait and returns the function that
// restores the one it had: the writers' own.
func busyFor(ctx context.Context, conn *sql.Conn, wait time.Duration) (restore func(), err error) {
	var old int64
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&old); err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", wait.Milliseconds())); err != nil {
		return nil, err
	}
	return func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA busy_timeout = %d", old))
	}, nil
}

// inMemory reports whether an SQLite dsn names no file: ":memory:", its URI
// forms ("file::memory:?cache=shared") and mode=memory all lose the state
// when the daemon stops.
func inMemory(dsn string) bool {
	path, query, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if path == "" || path == ":memory:" {
		return true
	}
	v, err := url.ParseQuery(query)
	return err == nil && v.Get("mode") == "memory"
}

// Close closes db's connection pool.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// IsSQLite reports whether db talks to SQLite.
func IsSQLite(db *gorm.DB) bool { return db.Dialector.Name() == "sqlite" }

// Size returns the database's size in bytes: for SQLite the main file's
// pages (the WAL is not counted), for PostgreSQL pg_database_size.
func Size(ctx context.Context, db *gorm.DB) (int64, error) {
	var n int64
	q := db.WithContext(ctx)
	var err error
	if IsSQLite(db) {
		err = q.Raw("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").Scan(&n).Error
	} else {
		err = q.Raw("SELECT pg_database_size(current_database())").Scan(&n).Error
	}
	if err != nil {
		return 0, fmt.Errorf("store: size: %w", err)
	}
	return n, nil
}
