package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/store"
)

// openFile opens a fresh read-write database in the test's temporary
// directory and closes it when the test ends.
func openFile(t *testing.T) (*gorm.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "npcd.db")
	db, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() { store.Close(db) })
	return db, path
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		dsn     string
		opt     store.Options
		wantErr error  // checked with errors.Is when set
		wantMsg string // checked as a substring when set
	}{
		{name: "memory", dsn: ":memory:", wantMsg: "needs a file path"},
		{name: "memory URI", dsn: "file::memory:", wantMsg: "needs a file path"},
		{name: "memory URI with query", dsn: "file::memory:?cache=shared", wantMsg: "needs a file path"},
		{name: "memory mode", dsn: "file:" + filepath.Join(dir, "x.db") + "?mode=memory", wantMsg: "needs a file path"},
		{name: "empty path", dsn: "", wantMsg: "needs a file path"},
		{name: "unknown driver", dsn: filepath.Join(dir, "x.db"), opt: store.Options{Driver: "mysql"}, wantErr: store.ErrUnknownDriver},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := store.Open(context.Background(), tt.dsn, tt.opt)
			if err == nil {
				store.Close(db)
				t.Fatalf("Open(%q, %+v) succeeded, want an error", tt.dsn, tt.opt)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Open(%q) = %v, want %v", tt.dsn, err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Open(%q) = %v, want it to say %q", tt.dsn, err, tt.wantMsg)
			}
		})
	}
}

func pragma(t *testing.T, db *gorm.DB, name string) string {
	t.Helper()
	var v string
	if err := db.Raw("PRAGMA " + name).Scan(&v).Error; err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

func TestOpenSetsPragmas(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	// Every pooled connection must carry the settings, not just the first:
	// hold three at once so the pool has to open three.
	for i := range 3 {
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, p := range []struct{ name, want string }{
			{"journal_mode", "wal"},
			{"foreign_keys", "1"},
			{"busy_timeout", "5000"},
			{"synchronous", "1"}, // NORMAL
			{"temp_store", "2"},  // MEMORY
		} {
			var got string
			if err := conn.QueryRowContext(ctx, "PRAGMA "+p.name).Scan(&got); err != nil {
				t.Fatalf("conn %d: PRAGMA %s: %v", i, p.name, err)
			}
			if got != p.want {
				t.Errorf("conn %d: PRAGMA %s = %q, want %q", i, p.name, got, p.want)
			}
		}
	}
}

func TestOpenBusyTimeoutOption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "npcd.db")
	db, err := store.Open(context.Background(), path, store.Options{BusyTimeout: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	if got := pragma(t, db, "busy_timeout"); got != "250" {
		t.Errorf("busy_timeout = %s, want 250", got)
	}
	if !store.IsSQLite(db) {
		t.Errorf("IsSQLite = false for an SQLite database")
	}
}

func TestOpenKeepsQueryOfAFileURI(t *testing.T) {
	// A DSN that already has a query must still get every setting: joining
	// with a second "?" would fold the first setting into the caller's last
	// parameter and drop it silently.
	path := filepath.Join(t.TempDir(), "npcd.db")
	db, err := store.Open(context.Background(), "file:"+path+"?cache=private", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	for _, p := range []struct{ name, want string }{{"busy_timeout", "5000"}, {"foreign_keys", "1"}, {"journal_mode", "wal"}} {
		if got := pragma(t, db, p.name); got != p.want {
			t.Errorf("PRAGMA %s = %q, want %q", p.name, got, p.want)
		}
	}
}

func TestReadOnlyOpen(t *testing.T) {
	ctx := context.Background()
	rw, path := openFile(t)
	if err := rw.Exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)").Error; err != nil {
		t.Fatal(err)
	}
	if err := rw.Exec("INSERT INTO notes (body) VALUES ('first')").Error; err != nil {
		t.Fatal(err)
	}

	// A 1ms busy timeout makes a reader that waited on the writer's lock
	// fail instead of merely being slow.
	ro, err := store.Open(ctx, path, store.Options{ReadOnly: true, BusyTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(ro)

	if err := ro.Exec("INSERT INTO notes (body) VALUES ('nope')").Error; err == nil {
		t.Errorf("insert through a read-only handle succeeded")
	}
	if err := ro.Exec("CREATE TABLE other (id INTEGER)").Error; err == nil {
		t.Errorf("create table through a read-only handle succeeded")
	}

	// The writer holds an open write transaction while the reader reads.
	tx := rw.Begin()
	if tx.Error != nil {
		t.Fatal(tx.Error)
	}
	defer tx.Rollback()
	if err := tx.Exec("INSERT INTO notes (body) VALUES ('uncommitted')").Error; err != nil {
		t.Fatal(err)
	}
	var bodies []string
	if err := ro.Raw("SELECT body FROM notes ORDER BY id").Scan(&bodies).Error; err != nil {
		t.Fatalf("read during a write: %v", err)
	}
	if got, want := strings.Join(bodies, ","), "first"; got != want {
		t.Errorf("reader saw %q during the write, want %q", got, want)
	}
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	bodies = nil
	if err := ro.Raw("SELECT body FROM notes ORDER BY id").Scan(&bodies).Error; err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(bodies, ","), "first,uncommitted"; got != want {
		t.Errorf("reader saw %q after the commit, want %q", got, want)
	}
}

func TestOpenReadOnlyMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.db")
	db, err := store.Open(context.Background(), path, store.Options{ReadOnly: true})
	if err == nil {
		// The ping may succeed lazily; the first query must not create the file.
		err = db.Exec("SELECT 1 FROM sqlite_master").Error
		store.Close(db)
	}
	if err == nil {
		t.Errorf("read-only open of a missing file succeeded")
	}
}

func TestSize(t *testing.T) {
	t.Parallel()
	db, _ := openFile(t)
	ctx := context.Background()
	before, err := store.Size(ctx, db)
	if err != nil || before <= 0 {
		t.Fatalf("Size = %d, %v; want a positive size", before, err)
	}
	if err := db.Exec("CREATE TABLE filler (b BLOB)").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO filler VALUES (zeroblob(200000))").Error; err != nil {
		t.Fatal(err)
	}
	after, err := store.Size(ctx, db)
	if err != nil || after < before+200000 {
		t.Errorf("Size after 200 kB = %d (before %d), %v", after, before, err)
	}
}

// A WAL that grew while a reader kept checkpoints from finishing shrinks to
// nothing once the reader is gone and Checkpoint runs.
func TestCheckpointTruncatesTheWAL(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "npcd.db")
	db, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	var limit int64
	if err := db.Raw("PRAGMA journal_size_limit").Row().Scan(&limit); err != nil || limit != store.WALSizeLimit {
		t.Fatalf("journal_size_limit = %d (%v), want %d", limit, err, store.WALSizeLimit)
	}
	if err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO t (v) VALUES ('a'), ('b')").Error; err != nil {
		t.Fatal(err)
	}
	// A reader in the middle of a query, on another connection: automatic
	// checkpoints cannot reset the log behind its snapshot, so it grows.
	sqlDB, _ := db.DB()
	reader, err := sqlDB.QueryContext(ctx, "SELECT v FROM t")
	if err != nil || !reader.Next() {
		t.Fatalf("reader: %v", err)
	}
	row := strings.Repeat("x", 4000)
	for i := 0; i < 2000; i++ {
		if err := db.Exec("INSERT INTO t (v) VALUES (?)", row).Error; err != nil {
			t.Fatal(err)
		}
	}
	grown := walSize(t, path)
	if grown < 4<<20 {
		t.Fatalf("the WAL is %d bytes under load, want it to have grown past 4 MiB", grown)
	}
	if done, err := store.Checkpoint(ctx, db, 100*time.Millisecond); err != nil || done {
		t.Fatalf("checkpoint with a reader active: done %v err %v, want not done", done, err)
	}
	reader.Close()
	// With the reader gone a checkpoint finishes. One may still find the
	// write gate's own checkpoint copying the log (SQLite then answers
	// busy at once, without waiting), and then the next call tries again,
	// as the daemon's next round of it does. Under -race on a loaded
	// machine that copy can take seconds, so the calls go on for a while.
	done := false
	for deadline := time.Now().Add(time.Minute); !done && time.Now().Before(deadline); {
		if done, err = store.Checkpoint(ctx, db, 100*time.Millisecond); err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
		if !done {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !done {
		t.Fatal("checkpoint: not done within a minute with no reader left")
	}
	if size := walSize(t, path); size != 0 {
		t.Fatalf("the WAL is %d bytes after the checkpoint (%d before), want 0", size, grown)
	}
	var count int
	if err := db.Raw("SELECT count(*) FROM t").Row().Scan(&count); err != nil || count != 2002 {
		t.Fatalf("rows after the checkpoint: %d %v", count, err)
	}
}

func walSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
