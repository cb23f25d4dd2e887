package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
)

// TxStmts keeps the hot statements of a transaction prepared. SQLite's
// driver parses every statement it is given, which for the few rows a
// tick writes costs as much as running it; a statement prepared here is
// parsed once per pooled connection and reused by every later transaction
// on that connection. The zero value is ready to use.
type TxStmts struct {
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

// prepareWait bounds the wait for a free connection to prepare a statement on.
const prepareWait = 100 * time.Millisecond

// Stmt returns query prepared for the transaction tx, or ok false when tx is
// not an SQLite transaction (other databases cache statements themselves),
// in which case the caller runs its statement the ordinary way. query uses
// SQLite's syntax. The statement is closed with the transaction.
func (p *TxStmts) Stmt(ctx context.Context, tx *gorm.DB, query string) (stmt *sql.Stmt, ok bool) {
	if p == nil || !IsSQLite(tx) {
		return nil, false
	}
	sqlTx, isTx := tx.Statement.ConnPool.(*sql.Tx)
	if !isTx {
		return nil, false
	}
	p.mu.Lock()
	st := p.stmts[query]
	p.mu.Unlock()
	if st == nil {
		// Prepared on another pooled connection: when none is free at
		// once (they may all wait for this transaction), the statement
		// runs unprepared this time.
		sqlDB, err := tx.DB()
		if err != nil {
			return nil, false
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), prepareWait)
		st, err = sqlDB.PrepareContext(pctx, query)
		cancel()
		if err != nil {
			return nil, false
		}
		p.mu.Lock()
		if had := p.stmts[query]; had != nil {
			st.Close()
			st = had
		} else {
			if p.stmts == nil {
				p.stmts = map[string]*sql.Stmt{}
			}
			p.stmts[query] = st
		}
		p.mu.Unlock()
	}
	return sqlTx.StmtContext(ctx, st), true
}

// Len returns how many statements are prepared.
func (p *TxStmts) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.stmts)
}

// InsertSQL returns an insert of rows rows of cols into table in SQLite's
// syntax, followed by tail (e.g. "RETURNING `id`").
func InsertSQL(table string, cols []string, rows int, tail string) string {
	var b strings.Builder
	b.WriteString("INSERT INTO `" + table + "` (")
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("`" + c + "`")
	}
	b.WriteString(") VALUES ")
	row := "(?" + strings.Repeat(",?", len(cols)-1) + ")"
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	if tail != "" {
		b.WriteString(" " + tail)
	}
	return b.String()
}

// ScanIDs runs the insert st with args and scans the id each row returns
// (RETURNING) into ids, in order; every row must return one.
func ScanIDs(ctx context.Context, st *sql.Stmt, args []any, ids []*int64) error {
	d := []any{nil}
	return ScanReturned(ctx, st, args, len(ids), func(i int) []any { d[0] = ids[i]; return d })
}

// ScanReturned runs the insert st with args and scans the row it returns
// (RETURNING) for its i-th row of values into dest(i), in order; it must
// return n rows.
func ScanReturned(ctx context.Context, st *sql.Stmt, args []any, n int, dest func(i int) []any) error {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		if got == n {
			return errors.New("the insert returned more rows than it was given")
		}
		if err := rows.Scan(dest(got)...); err != nil {
			return err
		}
		got++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("the insert returned %d rows for %d", got, n)
	}
	return rows.Close()
}
