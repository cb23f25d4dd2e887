package store

import (
	"context"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"
)

// Migration is one step of a component's schema. Steps of a component run in
// Version order, each in its own transaction, and each is recorded in
// schema_migrations so it runs once per database.
//
// Up runs on every dialect; SQLite and Postgres, when set, run after it on
// that dialect only (what one dialect needs and the other has no use for,
// such as full-text indexes). A step is versioned alike on both, so a
// database of either dialect records the same versions.
type Migration struct {
	Component string // owning package, e.g. "character"
	Version   int    // 1, 2, ... within the component
	Name      string // short description
	Up        func(tx *gorm.DB) error
	SQLite    func(tx *gorm.DB) error
	Postgres  func(tx *gorm.DB) error
}

// up runs the step's statements for tx's dialect.
func (m Migration) up(tx *gorm.DB) error {
	if m.Up != nil {
		if err := m.Up(tx); err != nil {
			return err
		}
	}
	dialect := m.Postgres
	if IsSQLite(tx) {
		dialect = m.SQLite
	}
	if dialect != nil {
		return dialect(tx)
	}
	return nil
}

// Exec runs stmts in tx, in order, and returns the first error: a
// migration step made of plain statements.
func Exec(tx *gorm.DB, stmts ...string) error {
	for _, q := range stmts {
		if err := tx.Exec(q).Error; err != nil {
			return err
		}
	}
	return nil
}

// schemaMigration records an applied step.
type schemaMigration struct {
	Component string `gorm:"primaryKey;size:32"`
	Version   int    `gorm:"primaryKey"`
	Name      string `gorm:"size:128"`
	AppliedAt time.Time
}

func (schemaMigration) TableName() string { return "schema_migrations" }

// Migrate applies every step of migs not yet recorded in db. A database that
// records a step newer than any this binary knows for a component is refused
// with ErrSchemaNewer, so an old binary never writes to a newer schema.
func Migrate(ctx context.Context, db *gorm.DB, migs []Migration) error {
	db = db.WithContext(ctx)
	if !IsSQLite(db) {
		// Daemons sharing a PostgreSQL database may start together: they
		// migrate one at a time, on one connection holding an advisory
		// lock.
		return db.Connection(func(conn *gorm.DB) error {
			// A new session, so each statement starts clean on the one
			// connection (Connection's own shares one statement).
			conn = conn.Session(&gorm.Session{})
			if err := conn.Exec("SELECT pg_advisory_lock(?)", migrateLockKey).Error; err != nil {
				return fmt.Errorf("store: migrate: lock: %w", err)
			}
			defer conn.Exec("SELECT pg_advisory_unlock(?)", migrateLockKey)
			return migrate(conn, migs)
		})
	}
	return migrate(db, migs)
}

// migrateLockKey is the advisory lock migrations take on PostgreSQL.
const migrateLockKey = 0x6e706364 // "npcd"

func migrate(db *gorm.DB, migs []Migration) error {
	if err := db.AutoMigrate(&schemaMigration{}); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	var applied []schemaMigration
	if err := db.Find(&applied).Error; err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	done := map[string]map[int]bool{}
	for _, a := range applied {
		if done[a.Component] == nil {
			done[a.Component] = map[int]bool{}
		}
		done[a.Component][a.Version] = true
	}
	latest := map[string]int{}
	for _, m := range migs {
		if m.Version > latest[m.Component] {
			latest[m.Component] = m.Version
		}
	}
	for _, a := range applied {
		if known, ok := latest[a.Component]; ok && a.Version > known {
			return fmt.Errorf("%w: %s is at version %d, this binary knows %d", ErrSchemaNewer, a.Component, a.Version, known)
		}
	}
	// Components run in the order the caller lists them (their tables may
	// reference each other); steps within a component run by version.
	order := map[string]int{}
	for _, m := range migs {
		if _, ok := order[m.Component]; !ok {
			order[m.Component] = len(order)
		}
	}
	sorted := append([]Migration(nil), migs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		oi, oj := order[sorted[i].Component], order[sorted[j].Component]
		if oi != oj {
			return oi < oj
		}
		return sorted[i].Version < sorted[j].Version
	})
	for _, m := range sorted {
		if done[m.Component][m.Version] {
			continue
		}
		err := db.Transaction(func(tx *gorm.DB) error {
			if err := m.up(tx); err != nil {
				return err
			}
			return tx.Create(&schemaMigration{Component: m.Component, Version: m.Version, Name: m.Name, AppliedAt: time.Now().UTC()}).Error
		})
		if err != nil {
			return fmt.Errorf("store: migrate %s v%d (%s): %w", m.Component, m.Version, m.Name, err)
		}
	}
	return nil
}

// Versions returns the applied version of every component.
func Versions(ctx context.Context, db *gorm.DB) (map[string]int, error) {
	var applied []schemaMigration
	if err := db.WithContext(ctx).Find(&applied).Error; err != nil {
		return nil, fmt.Errorf("store: versions: %w", err)
	}
	v := map[string]int{}
	for _, a := range applied {
		if a.Version > v[a.Component] {
			v[a.Component] = a.Version
		}
	}
	return v, nil
}
