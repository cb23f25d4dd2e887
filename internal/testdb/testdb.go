package testdb

import (
	"context"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/internal/schema"
	"github.com/npcd/npcd/store"
)

// Open returns a new migrated database of the running pass's dialect.
func Open(t testing.TB) *gorm.DB {
	t.Helper()
	return OpenAt(t, filepath.Join(t.TempDir(), "npcd.db"))
}

// OpenAt opens (creating if needed) and migrates the database at path (on
// PostgreSQL the database dbtest.OpenAt keeps for path); it is closed when
// the test ends.
func OpenAt(t testing.TB, path string) *gorm.DB {
	t.Helper()
	return migrate(t, dbtest.OpenAt(t, path))
}

// Postgres returns a new migrated PostgreSQL database whatever the pass; see
// dbtest.Postgres for when it skips.
func Postgres(t testing.TB) *gorm.DB {
	t.Helper()
	return migrate(t, dbtest.Postgres(t))
}

func migrate(t testing.TB, db *gorm.DB) *gorm.DB {
	t.Helper()
	if err := store.Migrate(context.Background(), db, schema.Migrations()); err != nil {
		t.Fatal(err)
	}
	return db
}
