// Package dbtest picks the database dialect tests run on and gives each test
// an empty database of it: an SQLite file in the test's temporary directory,
// or a PostgreSQL schema of its own, dropped when the test ends.
//
// A package whose tests use it runs them twice from its TestMain (Main):
// once on SQLite and, when the environment variable NPCD_TEST_POSTGRES
// holds a PostgreSQL DSN, once more on PostgreSQL. Without the variable the
// PostgreSQL pass (and every test asking for PostgreSQL) is skipped with a
// message; with it, a server that cannot be reached fails the package.
//
// On PostgreSQL each test binary creates one database, named after the
// DSN's database (npcd_test when it names none or "postgres") and the
// process id, so packages tested in parallel never share one, and drops it
// at the end; each test gets a schema of that database (a new schema costs
// far less than a new database). Advisory locks belong to a database, not a
// schema: tests of one package that take the same advisory locks must not
// run in parallel.
//
// Only tests import it. It imports store and nothing else of npcd;
// internal/testdb builds the migrated databases on it.
package dbtest
