package store_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/internal/schema"
	"github.com/npcd/npcd/store"
)

type duoThing struct {
	ID      int64
	OwnerID string `gorm:"size:64;not null"`
}

type duoOther struct {
	ID   int64
	Name string
}

// Two daemons starting together on a new PostgreSQL database migrate one
// after the other: both succeed, each step runs once, and npcd's schema
// applies through the lock's single connection.
func TestMigrateConcurrentlyOnPostgres(t *testing.T) {
	base := os.Getenv("NPCD_TEST_POSTGRES")
	if base == "" {
		t.Skip("NPCD_TEST_POSTGRES is not set: this test needs a PostgreSQL server (CI sets it)")
	}
	ctx := context.Background()
	admin, err := store.Open(ctx, base, store.Options{Driver: store.DriverPostgres})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(admin)
	name := fmt.Sprintf("lease_migrate_%d_%d", os.Getpid(), time.Now().UnixNano())
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		t.Fatal(err)
	}
	defer admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("NPCD_TEST_POSTGRES must be a URL here: %v", err)
	}
	u.Path = "/" + name
	var mu sync.Mutex
	runs := 0
	migs := []store.Migration{{Component: "duo", Version: 1, Name: "slow table", Up: func(tx *gorm.DB) error {
		mu.Lock()
		runs++
		mu.Unlock()
		if err := tx.Exec("SELECT pg_sleep(0.2)").Error; err != nil {
			return err
		}
		return tx.Exec("CREATE TABLE duo (id INT PRIMARY KEY)").Error
	}}, {Component: "duo", Version: 2, Name: "models", Up: func(tx *gorm.DB) error {
		return tx.AutoMigrate(&duoThing{}, &duoOther{})
	}}}
	// npcd's own schema, after the toy steps.
	migs = append(migs, schema.Migrations()...)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := store.Open(ctx, u.String(), store.Options{Driver: store.DriverPostgres})
			if err != nil {
				errs[i] = err
				return
			}
			defer store.Close(db)
			errs[i] = store.Migrate(ctx, db, migs)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("daemon %d: %v", i, err)
		}
	}
	var versions int64
	check, err := store.Open(ctx, u.String(), store.Options{Driver: store.DriverPostgres})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(check)
	if err := check.Raw("SELECT count(*) FROM schema_migrations").Scan(&versions).Error; err != nil || versions != int64(len(migs)) {
		t.Errorf("schema_migrations holds %d steps (%v), want %d", versions, err, len(migs))
	}
	if runs != 1 {
		t.Errorf("the step ran %d times, want once", runs)
	}
}
