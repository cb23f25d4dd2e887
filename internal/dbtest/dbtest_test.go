package dbtest

import (
	"testing"

	"github.com/npcd/npcd/store"
)

func TestDSNs(t *testing.T) {
	tests := []struct{ dsn, prefix, withX string }{
		{"postgres://u@127.0.0.1:5432/postgres?sslmode=disable", "npcd_test", "postgres://u@127.0.0.1:5432/x?sslmode=disable"},
		{"postgresql://u@h/Game-DB", "game_db", "postgresql://u@h/x"},
		{"postgres://u@h", "npcd_test", "postgres://u@h/x"},
		{"host=h user=u dbname=npcd sslmode=disable", "npcd", "host=h user=u sslmode=disable dbname=x"},
	}
	for _, tt := range tests {
		if got := prefix(tt.dsn); got != tt.prefix {
			t.Errorf("prefix(%q) = %q, want %q", tt.dsn, got, tt.prefix)
		}
		if got, err := withDatabase(tt.dsn, "x"); err != nil || got != tt.withX {
			t.Errorf("withDatabase(%q) = %q, %v, want %q", tt.dsn, got, err, tt.withX)
		}
	}
}

// Each test gets its own empty database of the pass's dialect; OpenAt
// gives the same one back for the same path.
func TestOpenIsFreshAndOpenAtReopens(t *testing.T) {
	type thing struct{ ID int }
	path := t.TempDir() + "/a.db"
	a := OpenAt(t, path)
	if a.Dialector.Name() != Dialect() {
		t.Fatalf("dialect %s in the %s pass", a.Dialector.Name(), Dialect())
	}
	if err := a.AutoMigrate(&thing{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Create(&thing{ID: 7}).Error; err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := OpenAt(t, path).Model(&thing{}).Count(&n).Error; err != nil || n != 1 {
		t.Errorf("reopened: %d rows, %v; want 1", n, err)
	}
	if Open(t).Migrator().HasTable(&thing{}) {
		t.Error("a new database has another test's table")
	}
}

func TestPostgresIsPostgres(t *testing.T) {
	db := Postgres(t)
	if db.Dialector.Name() != store.DriverPostgres {
		t.Fatalf("dialect %s", db.Dialector.Name())
	}
}
