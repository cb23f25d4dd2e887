package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/npcd/npcd/store"
)

// Schema makes a new schema in the PostgreSQL database at dsn, so that a
// measurement never sees another run's NPCs, and returns dsn with the
// schema as its search path; drop removes the schema and everything in it.
func Schema(ctx context.Context, dsn string) (schemaDSN string, drop func(), err error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", nil, err
	}
	admin, err := store.Open(ctx, dsn, store.Options{Driver: store.DriverPostgres, MaxOpenConns: 1})
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("npcd_bench_%d_%d", os.Getpid(), time.Now().UnixNano())
	drop = func() {
		admin.Exec("DROP SCHEMA IF EXISTS " + name + " CASCADE")
		store.Close(admin)
	}
	if err := admin.WithContext(ctx).Exec("CREATE SCHEMA " + name).Error; err != nil {
		drop()
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}
