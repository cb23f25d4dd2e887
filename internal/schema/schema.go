package schema

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
)

// Migrations is the whole schema, in dependency order: character's tables
// first (journal's full-text tables index its messages), then journal's,
// then sleep's.
func Migrations() []store.Migration {
	var m []store.Migration
	m = append(m, character.Migrations()...)
	m = append(m, journal.Migrations()...)
	m = append(m, sleep.Migrations()...)
	return m
}

// Current checks that a database opened read-only is at the schema
// this binary knows: an older one cannot be migrated without writing, and a
// newer one may hold what this binary cannot read.
func Current(ctx context.Context, db *gorm.DB) error {
	have, err := store.Versions(ctx, db)
	if err != nil {
		return fmt.Errorf("read the schema version (is this an npcd database?): %w", err)
	}
	latest := map[string]int{}
	var order []string
	for _, m := range Migrations() {
		if _, ok := latest[m.Component]; !ok {
			order = append(order, m.Component)
		}
		latest[m.Component] = max(latest[m.Component], m.Version)
	}
	for _, comp := range order {
		switch v := have[comp]; {
		case v < latest[comp]:
			return fmt.Errorf("the database is at %s schema %d, this npcd needs %d: start the daemon on it once to upgrade it",
				comp, v, latest[comp])
		case v > latest[comp]:
			return fmt.Errorf("%w: %s is at version %d, this binary knows %d", store.ErrSchemaNewer, comp, v, latest[comp])
		}
	}
	return nil
}
