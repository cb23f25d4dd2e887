package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// A checkpoint that copies the last frames of the write-ahead log into the
// database syncs the database file before the log can be started over,
// and it holds the writers meanwhile. The passes that run beside the
// writers copy most of the log without syncing (they stop short of its
// end while readers read it), so the pass that holds them had a whole
// log's worth of the database's pages to flush: some 5 ms at 16 MiB, while
// every writer waited. syncDB flushes them beforehand, beside the
// writers, and the held pass syncs only what it copies itself.
//
// The file is synced through a descriptor of npcd's own, kept open while
// connections of npcd's writing pools are open on the file: closing any
// descriptor of a file drops every POSIX lock the process holds on it,
// SQLite's included, so it is closed only once the last of them is. (A
// read-only pool, which a process opens instead of a writing one, is not
// counted: one open beside a writing pool on the same file in the same
// process could lose its locks when the writing pool closes.)

// dbFile is an SQLite database file that connections of npcd's gated pools
// have open, and the descriptor syncDB syncs it through, opened at its
// first sync.
type dbFile struct {
	conns int
	f     *os.File
}

// dbFiles maps the path of each database file, as SQLite names it, to its
// dbFile.
var dbFiles = struct {
	sync.Mutex
	m map[string]*dbFile
}{m: map[string]*dbFile{}}

// openedFile counts a connection open on the database file at path.
func openedFile(path string) {
	dbFiles.Lock()
	defer dbFiles.Unlock()
	df := dbFiles.m[path]
	if df == nil {
		df = &dbFile{}
		dbFiles.m[path] = df
	}
	df.conns++
}

// closedFile counts a connection to the file at path closed, and closes
// the file's descriptor once no connection is left.
func closedFile(path string) error {
	dbFiles.Lock()
	defer dbFiles.Unlock()
	df := dbFiles.m[path]
	if df == nil {
		return nil
	}
	if df.conns--; df.conns > 0 {
		return nil
	}
	delete(dbFiles.m, path)
	if df.f != nil {
		return df.f.Close()
	}
	return nil
}

// syncDB flushes the database file at path to disk. The caller holds a
// connection open on it, which keeps the descriptor open meanwhile.
func syncDB(path string) error {
	f, err := descriptor(path)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("store: sync %s: %w", path, err)
	}
	return nil
}

// descriptor returns npcd's descriptor of the database file at path,
// opening it the first time.
func descriptor(path string) (*os.File, error) {
	dbFiles.Lock()
	defer dbFiles.Unlock()
	df := dbFiles.m[path]
	if df == nil || df.conns == 0 {
		return nil, errors.New("no connection is open on it")
	}
	if df.f == nil {
		// Written through: Sync needs write access on some systems.
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		df.f = f
	}
	return df.f, nil
}

// mainFile returns the path of the main database file of an SQLite
// connection, "" for one without a file.
func mainFile(conn driver.Conn) (string, error) {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return "", errors.New("store: the driver's connections cannot be queried")
	}
	rows, err := q.QueryContext(context.Background(), "PRAGMA database_list", nil)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	row := make([]driver.Value, len(rows.Columns()))
	for {
		if err := rows.Next(row); err != nil {
			if errors.Is(err, io.EOF) {
				return "", nil
			}
			return "", err
		}
		if len(row) >= 3 && fmt.Sprint(row[1]) == "main" {
			if s, ok := row[2].(string); ok {
				return s, nil
			}
			return "", nil
		}
	}
}

// syncConnDB syncs the database file of conn, a connection of a gated
// pool, and reports whether it did: not for a pool without a file, nor
// when the sync failed (the checkpoint that follows syncs it then).
func syncConnDB(conn *sql.Conn) bool {
	file := connFile(conn)
	return file != "" && syncDB(file) == nil
}

// connFile returns the database file of conn, a connection of a gated
// pool; "" when it has none.
func connFile(conn *sql.Conn) string {
	var path string
	_ = conn.Raw(func(dc any) error {
		if c, ok := dc.(*gatedConn); ok {
			path = c.file
		}
		return nil
	})
	return path
}
