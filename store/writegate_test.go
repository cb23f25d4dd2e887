package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/store"
)

// Writers of one process queue at the write gate: with SQLite's own busy
// wait cut to a millisecond, many concurrent transactions and plain writes
// would fail with "database is locked" if they met in SQLite; at the gate
// every one of them goes through.
func TestWritersQueueInsteadOfFailing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "npcd.db")
	db, err := store.Open(ctx, path, store.Options{BusyTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	if err := db.Exec(`CREATE TABLE rows (id INTEGER PRIMARY KEY, v TEXT)`).Error; err != nil {
		t.Fatal(err)
	}
	const workers, each = 12, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if w%3 == 0 { // a write outside any transaction, with RETURNING
					var id int64
					errs <- db.Raw(`INSERT INTO rows (v) VALUES (?) RETURNING id`, fmt.Sprint(w, i)).Scan(&id).Error
					continue
				}
				errs <- db.Transaction(func(tx *gorm.DB) error {
					var n int64
					if err := tx.Raw(`SELECT count(*) FROM rows`).Scan(&n).Error; err != nil {
						return err
					}
					time.Sleep(200 * time.Microsecond) // hold the lock a while
					return tx.Exec(`INSERT INTO rows (v) VALUES (?)`, fmt.Sprint(w, i)).Error
				})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a write failed: %v", err)
		}
	}
	var n int64
	if err := db.Raw(`SELECT count(*) FROM rows`).Scan(&n).Error; err != nil || n != workers*each {
		t.Fatalf("%d rows (%v), want %d", n, err, workers*each)
	}
}

// A write that cannot get its turn gives up after WriteWait with
// ErrWriteWait, or when its context ends; reads go on meanwhile.
func TestWriteWaitGivesUp(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "npcd.db")
	db, err := store.Open(ctx, path, store.Options{WriteWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	if err := db.Exec(`CREATE TABLE rows (id INTEGER PRIMARY KEY)`).Error; err != nil {
		t.Fatal(err)
	}
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.Transaction(func(tx *gorm.DB) error {
			close(holding)
			<-release
			return tx.Exec(`INSERT INTO rows DEFAULT VALUES`).Error
		})
	}()
	<-holding
	if err := db.Exec(`INSERT INTO rows DEFAULT VALUES`).Error; !errors.Is(err, store.ErrWriteWait) {
		t.Errorf("write while another holds the gate: %v, want ErrWriteWait", err)
	}
	// A prepared statement's write waits at the gate as a plain one does,
	// with RETURNING too; a prepared read does not.
	h := store.Prepared(db)
	if err := h.Exec(`INSERT INTO rows DEFAULT VALUES`).Error; !errors.Is(err, store.ErrWriteWait) {
		t.Errorf("prepared write while another holds the gate: %v, want ErrWriteWait", err)
	}
	var id int64
	if err := h.Raw(`INSERT INTO rows DEFAULT VALUES RETURNING id`).Scan(&id).Error; !errors.Is(err, store.ErrWriteWait) {
		t.Errorf("prepared write with RETURNING while another holds the gate: %v, want ErrWriteWait", err)
	}
	var pn int64
	if err := h.Raw(`SELECT count(*) FROM rows`).Scan(&pn).Error; err != nil {
		t.Errorf("a prepared read waited for the gate: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.WithContext(cctx).Transaction(func(tx *gorm.DB) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("transaction with an ended context: %v, want context.Canceled", err)
	}
	var n int64
	if err := db.Raw(`SELECT count(*) FROM rows`).Scan(&n).Error; err != nil {
		t.Errorf("a read waited for the gate: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`INSERT INTO rows DEFAULT VALUES`).Error; err != nil {
		t.Errorf("write once the gate is free: %v", err)
	}
	if err := h.Raw(`INSERT INTO rows DEFAULT VALUES RETURNING id`).Scan(&id).Error; err != nil {
		t.Errorf("prepared write once the gate is free: %v", err)
	}
	// The gate was given back after each prepared write: a plain write
	// still gets it.
	if err := db.Exec(`INSERT INTO rows DEFAULT VALUES`).Error; err != nil {
		t.Errorf("write after a prepared write: %v", err)
	}
	if err := db.Raw(`SELECT count(*) FROM rows`).Scan(&n).Error; err != nil || n != 4 {
		t.Errorf("%d rows (%v), want 4", n, err)
	}
}
