// Package testdb gives tests a real, fresh npcd database with the whole
// schema applied, closed when the test ends: of the dialect internal/dbtest
// picks (an SQLite file in the test's temporary directory, or a PostgreSQL
// database in a package whose TestMain runs dbtest.Main).
//
// Only tests import it. It migrates with internal/schema, the list the
// daemon uses, which imports the packages whose tables make the schema
// (character, journal, sleep), so the internal tests of those three
// packages cannot use it; they use dbtest and their own migrations.
package testdb
