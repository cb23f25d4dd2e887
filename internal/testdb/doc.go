// Package testdb gives tests a real, fresh npcd database: an SQLite file in
// the test's temporary directory with the whole schema applied, closed when
// the test ends.
//
// Only tests import it. It migrates with internal/schema, the list the
// daemon uses, which imports the packages whose tables make the schema
// (character, journal, sleep), so the tests of those three packages cannot
// use it and open their own.
package testdb
