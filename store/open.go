package store

import (
	"context"
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
		db, err = gorm.Open(sqlite.New(sqlite.Config{DriverName: "sqlite", DSN: sqliteDSN(dsn, opt)}), cfg)
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
	if opt.ReadOnly {
		q.Set("mode", "ro")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
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
