package store

import (
	"context"

	"gorm.io/gorm"
)

// RunTransaction runs fn in one transaction on db, with ctx, as
// db.WithContext(ctx).Transaction(fn) does: fn's error (or a panic in fn)
// rolls it back, else it commits, and fn's gorm statements run with ctx.
//
// On SQLite, where db is not a transaction, it begins the transaction on
// db's connection pool itself: gorm's path clones db's statement three
// times (the session that carries ctx, then Begin's instance and its
// session), this one once, and the few statements a tick's transaction
// runs are mostly prepared ones that never use the clones. Elsewhere
// (PostgreSQL, a transaction already, a transaction timeout configured, no
// ctx) it is gorm's path.
func RunTransaction(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) (err error) {
	beginner, ok := db.Statement.ConnPool.(gorm.TxBeginner)
	if !ok || ctx == nil || !IsSQLite(db) || db.DefaultTransactionTimeout > 0 {
		return db.WithContext(ctx).Transaction(fn)
	}
	if _, isTx := db.Statement.ConnPool.(gorm.TxCommitter); isTx {
		return db.WithContext(ctx).Transaction(fn) // nested: gorm's savepoint
	}
	// As gorm's Begin, from a session of db that carries ctx (cloning its
	// statement, so the pool set below is the transaction's own).
	tx := db.Session(&gorm.Session{Context: ctx})
	sqlTx, err := beginner.BeginTx(ctx, nil)
	if err != nil {
		tx.AddError(err)
		return tx.Error
	}
	tx.Statement.ConnPool = sqlTx
	// The rest is gorm's Transaction.
	panicked := true
	defer func() {
		if panicked || err != nil {
			tx.Rollback()
		}
	}()
	if err = fn(tx); err == nil {
		panicked = false
		return tx.Commit().Error
	}
	panicked = false
	return err
}
