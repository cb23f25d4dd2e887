package schema

import (
	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/lease"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
)

// Migrations is the whole schema, in dependency order: character's tables
// first (journal's full-text tables index its messages), then journal's,
// then sleep's, then the leases of NPCs across daemons.
func Migrations() []store.Migration {
	var m []store.Migration
	m = append(m, character.Migrations()...)
	m = append(m, journal.Migrations()...)
	m = append(m, sleep.Migrations()...)
	m = append(m, lease.Migrations()...)
	return m
}
