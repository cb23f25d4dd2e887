// Package dbtest picks the database dialect tests run on and gives each test
// an empty database of it: an SQLite file in the test's temporary directory,
// or a new PostgreSQL database dropped when the test ends.
//
// A package whose tests use it runs them twice from its TestMain (Main):
// once on SQLite and, when the environment variable NPCD_TEST_POSTGRES
// holds a PostgreSQL DSN, once more on PostgreSQL. Without the variable the
// PostgreSQL pass is skipped with a message; with it, a server that cannot be
// reached fails the package. Each test's PostgreSQL database is named after
// the DSN's database (npcd_test when it names none or "postgres"), the
// process id and a counter, so packages tested in parallel never share one.
//
// Only tests import it. It imports store and nothing else of npcd;
// internal/testdb builds the migrated databases on it.
package dbtest
