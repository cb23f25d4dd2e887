package dbtest

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/store"
)

// EnvPostgres names the environment variable holding the PostgreSQL DSN
// tests may use, e.g. postgres://postgres@127.0.0.1:5432/npcd_test?sslmode=disable.
const EnvPostgres = "NPCD_TEST_POSTGRES"

var (
	dialect atomic.Value // string: the dialect of the running pass
	counter atomic.Int64

	pathsMu sync.Mutex
	paths   = map[string]string{} // OpenAt's path -> the DSN of its PostgreSQL schema
)

func init() { dialect.Store(store.DriverSQLite) }

// Dialect is the dialect of the running pass: store.DriverSQLite or
// store.DriverPostgres.
func Dialect() string { return dialect.Load().(string) }

// Main runs the package's tests on SQLite, then, when NPCD_TEST_POSTGRES is
// set, again on PostgreSQL, and returns the exit code for os.Exit.
// Benchmarks and fuzzing run in the SQLite pass only.
func Main(m *testing.M) int {
	dsn := os.Getenv(EnvPostgres)
	code := m.Run()
	if dsn == "" {
		fmt.Printf("dbtest: %s is not set: the PostgreSQL pass of these tests is skipped\n", EnvPostgres)
		return code
	}
	if _, err := packageDB(); err != nil {
		fmt.Printf("dbtest: FAIL: %s is set but the server is not usable: %v\n", EnvPostgres, err)
		return 1
	}
	defer func() {
		if err := dropPackageDB(); err != nil {
			fmt.Printf("dbtest: drop the tests' database: %v\n", err)
		}
	}()
	for _, name := range []string{"test.bench", "test.fuzz"} {
		if f := flag.Lookup(name); f != nil {
			f.Value.Set("")
		}
	}
	fmt.Println("dbtest: the same tests on PostgreSQL")
	dialect.Store(store.DriverPostgres)
	defer dialect.Store(store.DriverSQLite)
	if c := m.Run(); c != 0 {
		code = c
	}
	return code
}

// Open returns an empty database of the running pass's dialect, closed (and
// on PostgreSQL its schema dropped) when the test ends.
func Open(t testing.TB) *gorm.DB {
	t.Helper()
	return OpenAt(t, filepath.Join(t.TempDir(), "npcd.db"))
}

// OpenAt is Open for a database a test opens more than once (a restart):
// on SQLite the file at path; on PostgreSQL the same schema for every call
// with the same path, dropped when the test that first opened it ends.
func OpenAt(t testing.TB, path string) *gorm.DB {
	t.Helper()
	if Dialect() != store.DriverPostgres {
		// go test caches a package's result by what its tests read, and
		// records nothing outside m.Run: reading the variable here makes
		// setting it run the package again.
		os.Getenv(EnvPostgres)
		return SQLiteAt(t, path)
	}
	pathsMu.Lock()
	dsn, ok := paths[path]
	pathsMu.Unlock()
	if !ok {
		dsn = create(t)
		pathsMu.Lock()
		paths[path] = dsn
		pathsMu.Unlock()
		t.Cleanup(func() {
			pathsMu.Lock()
			delete(paths, path)
			pathsMu.Unlock()
		})
	}
	return connect(t, dsn)
}

// SQLiteAt opens (creating if needed) the SQLite database at path, closed
// when the test ends, whatever the pass.
func SQLiteAt(t testing.TB, path string) *gorm.DB {
	t.Helper()
	db, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(db) })
	return db
}

// Postgres returns a new, empty PostgreSQL schema whatever the pass,
// dropped when the test ends. The test is skipped when NPCD_TEST_POSTGRES is
// not set, and fails when it is set and the server is not usable.
func Postgres(t testing.TB) *gorm.DB {
	t.Helper()
	return connect(t, create(t))
}

// PostgresDSN is Postgres for a test that opens the database itself (a
// daemon, a command): the DSN of a new, empty schema (its search_path),
// dropped when the test ends. Outside a package whose TestMain runs Main,
// the database holding it stays until dropped by hand.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return create(t)
}

// create makes a new schema, in the package's database, for t and registers
// its drop; it skips or fails t as Postgres says. It returns the DSN that
// opens it.
func create(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvPostgres)
	if dsn == "" {
		t.Skipf("PostgreSQL test skipped: set %s to a PostgreSQL DSN (e.g. postgres://postgres@127.0.0.1:5432/npcd_test?sslmode=disable) to run it", EnvPostgres)
	}
	pkg, err := packageDB()
	if err != nil {
		t.Fatalf("%s is set but the server is not usable: %v", EnvPostgres, err)
	}
	name := fmt.Sprintf("t%d", counter.Add(1))
	if err := pkg.db.Exec("CREATE SCHEMA " + name).Error; err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	t.Logf("database: PostgreSQL %s, schema %s", pkg.name, name)
	t.Cleanup(func() {
		if err := pkg.db.Exec("DROP SCHEMA IF EXISTS " + name + " CASCADE").Error; err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return withSearchPath(pkg.dsn, name)
}

// connect opens the database at dsn, closed when the test ends.
func connect(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Options{Driver: store.DriverPostgres})
	if err != nil {
		t.Fatalf("open PostgreSQL database: %v", err)
	}
	t.Cleanup(func() { store.Close(db) })
	return db
}

// pkgDB is the database a test binary's PostgreSQL tests make their
// schemas in.
type pkgDB struct {
	name, dsn string
	db        *gorm.DB
}

var (
	pkgOnce sync.Once
	pkg     *pkgDB
	pkgErr  error
)

// packageDB creates the test binary's database on first use; dropPackageDB
// drops it.
func packageDB() (*pkgDB, error) {
	pkgOnce.Do(func() {
		dsn := os.Getenv(EnvPostgres)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := store.Open(ctx, dsn, store.Options{Driver: store.DriverPostgres, MaxOpenConns: 1})
		if err != nil {
			pkgErr = err
			return
		}
		defer store.Close(admin)
		p := &pkgDB{name: fmt.Sprintf("%s_%d", prefix(dsn), os.Getpid())}
		if err := admin.WithContext(ctx).Exec("DROP DATABASE IF EXISTS " + p.name + " WITH (FORCE)").Error; err != nil {
			pkgErr = err
			return
		}
		if err := admin.WithContext(ctx).Exec("CREATE DATABASE " + p.name).Error; err != nil {
			pkgErr = err
			return
		}
		if p.dsn, pkgErr = withDatabase(dsn, p.name); pkgErr != nil {
			return
		}
		if p.db, pkgErr = store.Open(ctx, p.dsn, store.Options{Driver: store.DriverPostgres, MaxOpenConns: 2}); pkgErr != nil {
			return
		}
		// Extensions belong to a database, not a schema: installed once in
		// public, where no test's schema drop takes it away. Without it
		// (no contrib modules), the migrations do without.
		p.db.WithContext(ctx).Exec("CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public")
		pkg = p
	})
	return pkg, pkgErr
}

func dropPackageDB() error {
	if pkg == nil {
		return nil
	}
	store.Close(pkg.db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := store.Open(ctx, os.Getenv(EnvPostgres), store.Options{Driver: store.DriverPostgres, MaxOpenConns: 1})
	if err != nil {
		return err
	}
	defer store.Close(admin)
	return admin.WithContext(ctx).Exec("DROP DATABASE IF EXISTS " + pkg.name + " WITH (FORCE)").Error
}

var notIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// prefix is the name the tests' databases start with: the DSN's database,
// or npcd_test when it names none or the default "postgres".
func prefix(dsn string) string {
	name := ""
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		name = strings.TrimPrefix(u.Path, "/")
	} else {
		for _, f := range strings.Fields(dsn) {
			if v, ok := strings.CutPrefix(f, "dbname="); ok {
				name = strings.Trim(v, `'`)
			}
		}
	}
	name = notIdent.ReplaceAllString(strings.ToLower(name), "_")
	if name == "" || name == "postgres" {
		return "npcd_test"
	}
	return name
}

// withDatabase returns dsn naming database name instead of its own.
func withDatabase(dsn, name string) (string, error) {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		return u.String(), nil
	}
	var fs []string
	for _, f := range strings.Fields(dsn) {
		if !strings.HasPrefix(f, "dbname=") {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 && dsn != "" {
		return "", fmt.Errorf("%s: cannot read %q as a PostgreSQL DSN", EnvPostgres, dsn)
	}
	return strings.Join(append(fs, "dbname="+name), " "), nil
}

// withSearchPath returns dsn with its tables in schema.
func withSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}
