package store

import (
	"context"
	"database/sql"
	"sync"

	"gorm.io/gorm"
)

// maxPrepared bounds the statements a Prepared handle keeps; any further
// statement text runs unprepared, so a caller that passes statements of
// varying shape (an IN list of any length) costs parsing, never memory.
const maxPrepared = 256

// Prepared returns a handle on db (not a transaction) whose statements are
// prepared once per connection and kept for the life of the process, on
// SQLite, where parsing a statement costs as much as running a small one;
// elsewhere it returns db. It is meant for the hot reads of fixed shape: each
// distinct statement text is kept, up to a bound past which statements run
// unprepared. Transactions begun on it run unprepared.
func Prepared(db *gorm.DB) *gorm.DB {
	if db == nil || !IsSQLite(db) {
		return db
	}
	sqlDB, err := db.DB()
	if err != nil {
		return db
	}
	// A Context makes the session clone its statement, so the pool set
	// below is the handle's own, not db's.
	h := db.Session(&gorm.Session{Context: context.Background()})
	h.Statement.ConnPool = &stmtPool{db: sqlDB}
	return h
}

// Stmt returns query prepared on h, a handle Prepared returned, for a hot
// read that skips gorm; nil when h keeps no statements (not SQLite, a
// transaction, or past the bound), and the caller runs query through h.
func Stmt(ctx context.Context, h *gorm.DB, query string) *sql.Stmt {
	if h == nil {
		return nil
	}
	p, ok := h.Statement.ConnPool.(*stmtPool)
	if !ok {
		return nil
	}
	return p.stmt(ctx, query)
}

// stmtPool is a gorm connection pool that prepares each statement text once
// (database/sql prepares it again on each connection that runs it).
type stmtPool struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
	full  bool
}

// stmt returns the prepared statement of query, or nil when it is not kept.
func (p *stmtPool) stmt(ctx context.Context, query string) *sql.Stmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.stmts[query]; ok {
		return st
	}
	if p.full {
		return nil
	}
	st, err := p.db.PrepareContext(ctx, query)
	if err != nil {
		return nil // run unprepared: the query reports its own error
	}
	if p.stmts == nil {
		p.stmts = map[string]*sql.Stmt{}
	}
	p.stmts[query] = st
	p.full = len(p.stmts) >= maxPrepared
	return st
}

func (p *stmtPool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.db.PrepareContext(ctx, query)
}

func (p *stmtPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.db.ExecContext(ctx, query, args...)
}

func (p *stmtPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.db.QueryContext(ctx, query, args...)
}

func (p *stmtPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.db.QueryRowContext(ctx, query, args...)
}

// BeginTx begins an ordinary transaction on the database.
func (p *stmtPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return p.db.BeginTx(ctx, opts)
}

// GetDBConn is the database, for gorm.DB.DB.
func (p *stmtPool) GetDBConn() (*sql.DB, error) { return p.db, nil }

// PadIn returns xs, a non-empty list for an IN clause, lengthened to the
// next power of two by repeating its last element: the same rows match,
// and lists of any length share a few statement texts, which a Prepared
// handle can keep.
func PadIn[T any](xs []T) []T {
	n := 1
	for n < len(xs) {
		n *= 2
	}
	if n == len(xs) || len(xs) == 0 {
		return xs
	}
	out := make([]T, n)
	copy(out, xs)
	for i := len(xs); i < n; i++ {
		out[i] = xs[len(xs)-1]
	}
	return out
}
