package main

import (
	"testing"

	"github.com/npcd/npcd/store"
)

// NPCD_DB holding a postgres:// URL picks the PostgreSQL driver by itself.
func TestPostgresURLPicksTheDriver(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u@127.0.0.1:5432/npcd":   store.DriverPostgres,
		"postgresql://u@127.0.0.1:5432/npcd": store.DriverPostgres,
		"./npcd.db":                          store.DriverSQLite,
	} {
		c := defaultConfig()
		c.DB = dsn
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if c.DBDriver != want {
			t.Errorf("%s: driver %s, want %s", dsn, c.DBDriver, want)
		}
	}
}
