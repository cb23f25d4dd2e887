package store

import (
	"context"
	"errors"

	"gorm.io/gorm"
)

// Retryable reports whether err is PostgreSQL aborting a transaction so
// that another can go on: a deadlock victim (SQLSTATE 40P01) or a
// serialization failure (40001). The whole transaction was rolled back and
// running it again is the remedy.
func Retryable(err error) bool {
	var pg interface{ SQLState() string }
	if !errors.As(err, &pg) {
		return false
	}
	switch pg.SQLState() {
	case "40P01", "40001":
		return true
	}
	return false
}

// Transaction runs fn in a transaction of db and, when PostgreSQL aborts it
// as Retryable says, runs it again, up to three times in all. fn must leave
// nothing behind outside the transaction that a second run would repeat.
func Transaction(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	var err error
	for try := 0; try < 3; try++ {
		if err = RunTransaction(ctx, db, fn); !Retryable(err) {
			return err
		}
	}
	return err
}
