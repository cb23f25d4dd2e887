package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWritesTellsWritesFromReads(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT 1":                              false,
		"  select * from x":                     false,
		"/* c */ -- line\n SELECT 1":            false,
		"(SELECT 1)":                            false,
		"WITH a AS (SELECT 1) SELECT * FROM a":  false,
		"PRAGMA busy_timeout":                   false,
		"PRAGMA busy_timeout = 100":             false,
		"EXPLAIN QUERY PLAN SELECT 1":           false,
		"PRAGMA wal_checkpoint(TRUNCATE)":       true,
		"PRAGMA wal_checkpoint":                 true,
		"PRAGMA wal_checkpoint(PASSIVE)":        false,
		"INSERT INTO x VALUES (1)":              true,
		"insert into x values (1) returning id": true,
		"UPDATE x SET a = 1":                    true,
		"DELETE FROM x":                         true,
		"REPLACE INTO x VALUES (1)":             true,
		"CREATE TABLE x (a)":                    true,
		"WITH a AS (SELECT 1) DELETE FROM x":    true,
		"-- only a comment":                     true,
		"VACUUM":                                true,
		"/* unterminated":                       true,
	} {
		if got := writes(q); got != want {
			t.Errorf("writes(%q) = %v, want %v", q, got, want)
		}
	}
}

// The pools npcd opens leave SQLite's automatic checkpoint off and
// checkpoint in the background every CheckpointEvery writes: once it holds
// restartFrames pages, the log is reused from its start instead of growing
// with every page written.
func TestGateCheckpointsTheLog(t *testing.T) {
	path, db, gate := openBlobs(t)
	ctx := context.Background()
	var auto int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("wal_autocheckpoint %d (%v), want 0: the gate checkpoints", auto, err)
	}
	page := strings.Repeat("x", 4096)     // a row a page, or more
	const rounds = 3200 / CheckpointEvery // 3,200 writes
	for r := 0; r < rounds; r++ {
		for i := 0; i < CheckpointEvery; i++ {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO blobs VALUES (?)", page); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		// The round's last write started a checkpoint: let it finish
		// (this waits, it times nothing).
		for deadline := time.Now().Add(time.Minute); gate.running.Load(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("a checkpoint never finished")
			}
		}
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// Unchecked, the log holds every page written: more than
	// rounds*CheckpointEvery*4 KiB (13 MiB), three times that with the
	// tree's pages. Checkpointed, a round's at most (with no reader, a
	// checkpoint catches up and the next writer starts the log over).
	if max := int64(2 * restartFrames * 4096); fi.Size() > max {
		t.Fatalf("the write-ahead log holds %d bytes after %d writes, want at most %d", fi.Size(), rounds*CheckpointEvery, max)
	}
}

// Under writers and readers that never pause, the log is started over
// again and again instead of growing with every page written: by the
// writers once a checkpoint's first pass has copied all of it, or by its
// second pass, which holds the gate, once it holds restartFrames pages
// (TestCheckpointRestartsOnceTheReadersLeave holds that pass to its
// rules).
func TestGateCheckpointsUnderLoad(t *testing.T) {
	path, db, gate := openBlobs(t)
	ctx := context.Background()
	page := strings.Repeat("x", 4096)
	// Each row is a page of data, some three pages of log with its
	// overflow and tree pages: never started over, the log would reach
	// some 3*rounds*restartFrames pages (150 MiB).
	const writers, rounds = 4, 3
	const each = rounds * restartFrames / writers
	done := make(chan struct{})
	var readers sync.WaitGroup
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				// A short read of the newest rows, whose pages the log
				// holds, as npcd's reads are short: a count of the whole
				// table would take longer as the table grows, until on a
				// slow machine every second pass found it still reading.
				var n int
				if err := db.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT rowid FROM blobs ORDER BY rowid DESC LIMIT 32)").Scan(&n); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var peak atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := tx.ExecContext(ctx, "INSERT INTO blobs VALUES (?)", page); err != nil {
					t.Error(err)
					tx.Rollback()
					return
				}
				if err := tx.Commit(); err != nil {
					t.Error(err)
					return
				}
				// The largest size any writer saw: a writer that saw less
				// never overwrites it.
				if fi, err := os.Stat(path + "-wal"); err == nil {
					for p := peak.Load(); fi.Size() > p; p = peak.Load() {
						if peak.CompareAndSwap(p, fi.Size()) {
							break
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	readers.Wait()
	// Started over each time it held restartFrames pages at the most, the
	// log never holds much more than that: what the writers append while a
	// checkpoint runs, and while a second pass waits for a reader.
	if max := int64(3 * restartFrames * 4096); peak.Load() > max {
		t.Fatalf("the write-ahead log reached %d bytes over %d writes (%d restarts by a second pass), want at most %d",
			peak.Load(), writers*each, gate.restarts.Load(), max)
	}
}

// openBlobs opens an SQLite database as npcd's pools are opened, behind a
// write gate, with a table of blobs to write; it returns the file's path.
func openBlobs(t *testing.T) (string, *sql.DB, *writeGate) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "wal.db")
	db, gate, err := openGate("sqlite", sqliteDSN(path, Options{}), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(context.Background(), "CREATE TABLE blobs (b BLOB)"); err != nil {
		t.Fatal(err)
	}
	return path, db, gate
}

// Closing the pool waits for a background checkpoint that is running, and
// starts none after: once Close returns, nothing touches the files.
func TestCloseWaitsForTheBackgroundCheckpoint(t *testing.T) {
	_, db, gate := openBlobs(t)
	ctx := context.Background()
	started, finished := make(chan struct{}), atomic.Bool{}
	var runs atomic.Int32
	gate.checkpoint = func() {
		if runs.Add(1) == 1 {
			close(started)
		}
		time.Sleep(200 * time.Millisecond) // a long copy
		gate.checkpointLog(db)
		finished.Store(true)
	}
	for i := 0; i < CheckpointEvery; i++ {
		if _, err := db.ExecContext(ctx, "INSERT INTO blobs VALUES (x'00')"); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if !finished.Load() || gate.running.Load() {
		t.Fatalf("Close returned while the background checkpoint ran (finished %v, running %v)", finished.Load(), gate.running.Load())
	}
	// A write counted after Close starts no checkpoint.
	gate.writes = CheckpointEvery
	gate.wrote()
	if gate.running.Load() || runs.Load() != 1 {
		t.Fatalf("a checkpoint started after Close: running %v, runs %d", gate.running.Load(), runs.Load())
	}
}

// The second pass of a checkpoint that finds a reader still reading the
// log tries again until the reader is gone, and then starts the log over.
func TestCheckpointRestartsOnceTheReadersLeave(t *testing.T) {
	path, db, gate := openBlobs(t)
	ctx := context.Background()
	gate.checkpoint = nil // this test runs the checkpoint itself
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	page := strings.Repeat("x", 4096)
	const rows = restartFrames + restartFrames/8 // a page a row, and more: past restartFrames
	for range rows {
		if _, err := tx.ExecContext(ctx, "INSERT INTO blobs VALUES (?)", page); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// A reader of another pool, outside the gate, reads the log.
	readers, err := sql.Open("sqlite", sqliteDSN(path, Options{ReadOnly: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer readers.Close()
	read, err := readers.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := read.QueryRowContext(ctx, "SELECT count(*) FROM blobs").Scan(&n); err != nil || n != rows {
		t.Fatalf("the reader counts %d rows (%v)", n, err)
	}
	tries := 0
	gate.readersBusy = func() {
		if tries++; tries == 1 {
			if err := read.Rollback(); err != nil {
				t.Error(err)
			}
		}
	}
	gate.checkpointLog(db)
	if tries == 0 {
		read.Rollback()
		t.Fatal("the checkpoint never found the reader: the test proves nothing")
	}
	if gate.restarts.Load() != 1 {
		t.Fatalf("%d restarts after the reader left, want 1", gate.restarts.Load())
	}
	// The database was synced before the pass that held the writers.
	if gate.presyncs.Load() != 1 {
		t.Fatalf("%d syncs of the database before the held pass, want 1", gate.presyncs.Load())
	}
	// The pass held the writers, and that counts as the writer held.
	if ck, held := gate.ckptHeld.Load(), gate.held.Load(); ck == 0 || held < ck {
		t.Fatalf("the checkpoint held the writers %d ns, the writer was held %d ns in all", ck, held)
	}
	// The next writer starts the log over: it stays a few pages long.
	if _, err := db.ExecContext(ctx, "INSERT INTO blobs VALUES (x'00')"); err != nil {
		t.Fatal(err)
	}
	var busy, logged, copied int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logged, &copied); err != nil {
		t.Fatal(err)
	}
	if logged > 16 {
		t.Fatalf("the log holds %d frames after one small write, want it started over", logged)
	}
}

// Writers reports how long a pool's writers held the gate and waited for
// it; a pool npcd did not open behind a gate has none, and nor has a
// closed one.
func TestWritersReportsTheGate(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "w.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("CREATE TABLE t (v INTEGER)").Error; err != nil {
		t.Fatal(err)
	}
	st, ok := Writers(db)
	if !ok || st.Held <= 0 {
		t.Fatalf("Writers = %+v, %v after a write, want the time it held the writer", st, ok)
	}
	sqlDB, _ := db.DB()
	v, _ := gates.Load(sqlDB)
	g := v.(*writeGate)
	// A writer that finds the gate taken counts its wait. Whether it
	// found it taken is seen in the count; a writer that came after the
	// gate was given back tries again.
	for try := 0; g.waited.Load() == 0; try++ {
		if try == 100 {
			t.Fatal("no writer ever waited for the gate")
		}
		g.turn <- struct{}{}
		done := make(chan error)
		go func() { done <- db.Exec("INSERT INTO t VALUES (1)").Error }()
		time.Sleep(time.Millisecond)
		<-g.turn
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := Writers(db); st.Waited <= 0 || st.Waited != time.Duration(g.waited.Load()) {
		t.Fatalf("Writers reports a wait of %s, the gate counted %d ns", st.Waited, g.waited.Load())
	}
	if err := Close(db); err != nil {
		t.Fatal(err)
	}
	if _, ok := Writers(db); ok {
		t.Fatal("a closed pool still has writer stats")
	}
}

// The descriptor a checkpoint syncs the database file through stays open
// while any connection of npcd's pools is open on the file (closing it
// would drop their POSIX locks), and is closed with the last of them.
func TestDatabaseFileDescriptorLivesAsLongAsItsConnections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.db")
	ctx := context.Background()
	open := func() *sql.DB {
		db, err := openGated("sqlite", sqliteDSN(path, Options{}), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS t (v)"); err != nil {
			t.Fatal(err)
		}
		return db
	}
	a, b := open(), open()
	conn, err := a.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	file := connFile(conn)
	if file == "" {
		t.Fatal("a connection of a gated pool names no database file")
	}
	if err := syncDB(file); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	dbFiles.Lock()
	df := dbFiles.m[file]
	dbFiles.Unlock()
	if df == nil || df.f == nil || df.conns < 2 {
		t.Fatalf("after a sync, the file's entry is %+v: want its descriptor, and both pools' connections", df)
	}
	f := df.f
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(); err != nil {
		t.Fatalf("the descriptor was closed while the other pool's connections were open: %v", err)
	}
	if _, err := b.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(); err == nil {
		t.Fatal("the descriptor is still open after the last connection closed")
	}
	dbFiles.Lock()
	left := dbFiles.m[file]
	dbFiles.Unlock()
	if left != nil {
		t.Fatal("the file's entry outlived its connections")
	}
	if err := syncDB(filepath.Join(t.TempDir(), "none.db")); err == nil {
		t.Fatal("a sync of a file no connection has open succeeded")
	}
}

// Checkpoint syncs the database file beside the writers before the pass
// that holds them.
func TestCheckpointSyncsTheDatabaseFirst(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Close(db) })
	if err := db.Exec("CREATE TABLE t (v)").Error; err != nil {
		t.Fatal(err)
	}
	if done, err := Checkpoint(ctx, db, time.Second); err != nil || !done {
		t.Fatalf("Checkpoint = %v, %v", done, err)
	}
	var file string
	if err := db.Raw("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file).Error; err != nil || file == "" {
		t.Fatalf("database file %q (%v)", file, err)
	}
	dbFiles.Lock()
	df := dbFiles.m[file]
	dbFiles.Unlock()
	if df == nil || df.f == nil {
		t.Fatalf("after Checkpoint the file's entry is %+v: it was not synced through its descriptor", df)
	}
}
