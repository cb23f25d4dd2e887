// Package store opens npcd's database and applies its versioned schema.
//
// It owns the connection settings (SQLite in WAL mode with a busy timeout,
// foreign keys on and a bounded log, or PostgreSQL), the checkpoint that
// truncates SQLite's write-ahead log, and the schema_migrations table. The tables
// themselves belong to the packages that use them (character, journal, sleep):
// each declares its migrations and cmd/npcd passes them all to Migrate.
//
// It must not import any other npcd package.
package store
