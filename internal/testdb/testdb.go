package testdb

import (
	"context"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"github.com/npcd/npcd/internal/schema"
	"github.com/npcd/npcd/store"
)

// Open returns a migrated database in a new file under t.TempDir().
func Open(t testing.TB) *gorm.DB {
	t.Helper()
	return OpenAt(t, filepath.Join(t.TempDir(), "npcd.db"))
}

// OpenAt opens (creating if needed) and migrates the database at path; it
// is closed when the test ends.
func OpenAt(t testing.TB, path string) *gorm.DB {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(db) })
	if err := store.Migrate(ctx, db, schema.Migrations()); err != nil {
		t.Fatal(err)
	}
	return db
}
