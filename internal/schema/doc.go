// Package schema is npcd's whole database schema in one list: the
// migrations of every package that owns tables (character, journal,
// sleep), in the order their tables depend on each other. The daemon, the
// admin commands and the tests' databases all migrate with this list, so
// they cannot drift apart.
//
// It imports store and the packages whose tables make the schema; it must
// not import tick, api, scenarios, eval or cmd.
package schema
