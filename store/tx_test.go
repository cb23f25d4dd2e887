package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"gorm.io/gorm"

	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/store"
)

type txKey struct{}

// TestRunTransaction checks that store.RunTransaction commits what fn
// wrote when it succeeds, rolls it back on fn's error or panic, runs fn's
// statements with ctx in a transaction of their own, and nests as gorm's
// savepoints do.
func TestRunTransaction(t *testing.T) {
	db := dbtest.Open(t)
	if err := db.Exec("CREATE TABLE p (n INTEGER NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), txKey{}, "mine")
	insert := func(tx *gorm.DB, n int) error { return tx.Exec("INSERT INTO p (n) VALUES (?)", n).Error }
	errRefused := errors.New("refused")

	// Committed, with ctx, in a transaction of its own.
	err := store.RunTransaction(ctx, db, func(tx *gorm.DB) error {
		if got := tx.Statement.Context.Value(txKey{}); got != "mine" {
			t.Errorf("the transaction's context carries %v, want the caller's", got)
		}
		if _, ok := tx.Statement.ConnPool.(*sql.Tx); !ok {
			t.Errorf("the transaction's pool is %T, want a *sql.Tx", tx.Statement.ConnPool)
		}
		return insert(tx, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := db.Statement.ConnPool.(*sql.Tx); ok {
		t.Error("the transaction's pool was set on db")
	}
	// Rolled back on an error, which is returned as it is.
	err = store.RunTransaction(ctx, db, func(tx *gorm.DB) error {
		if err := insert(tx, 2); err != nil {
			return err
		}
		return errRefused
	})
	if !errors.Is(err, errRefused) {
		t.Errorf("RunTransaction = %v, want fn's error", err)
	}
	// Rolled back on a panic, which goes on.
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("recovered %v, want fn's panic", v)
			}
		}()
		store.RunTransaction(ctx, db, func(tx *gorm.DB) error {
			if err := insert(tx, 3); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	// Nested: the inner one's failure rolls back only what it wrote.
	err = store.RunTransaction(ctx, db, func(tx *gorm.DB) error {
		if err := insert(tx, 4); err != nil {
			return err
		}
		if err := store.RunTransaction(ctx, tx, func(tx *gorm.DB) error {
			if err := insert(tx, 5); err != nil {
				return err
			}
			return errRefused
		}); !errors.Is(err, errRefused) {
			t.Errorf("nested RunTransaction = %v, want fn's error", err)
		}
		return store.RunTransaction(ctx, tx, func(tx *gorm.DB) error { return insert(tx, 6) })
	})
	if err != nil {
		t.Fatal(err)
	}
	// A context already ended begins nothing.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	called := false
	if err := store.RunTransaction(canceled, db, func(tx *gorm.DB) error { called = true; return nil }); err == nil || called {
		t.Errorf("RunTransaction with an ended context = %v, fn called %v; want an error and no call", err, called)
	}

	var got []int
	if err := db.Raw("SELECT n FROM p ORDER BY n").Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 6 {
		t.Errorf("rows %v, want [1 4 6]", got)
	}
}
