package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/store"
)

// recorder builds migrations that log each run, so a test can see which
// steps ran and in which order.
type recorder struct{ ran []string }

func (r *recorder) step(component string, version int, up func(tx *gorm.DB) error) store.Migration {
	return store.Migration{
		Component: component, Version: version, Name: fmt.Sprintf("%s step %d", component, version),
		Up: func(tx *gorm.DB) error {
			r.ran = append(r.ran, fmt.Sprintf("%s/%d", component, version))
			if up != nil {
				return up(tx)
			}
			return nil
		},
	}
}

func exec(sql string) func(tx *gorm.DB) error {
	return func(tx *gorm.DB) error { return tx.Exec(sql).Error }
}

func tableExists(t *testing.T, db *gorm.DB, name string) bool {
	t.Helper()
	return db.Migrator().HasTable(name)
}

func versions(t *testing.T, db *gorm.DB) map[string]int {
	t.Helper()
	v, err := store.Versions(context.Background(), db)
	if err != nil {
		t.Fatalf("Versions: %v", err)
	}
	return v
}

func TestMigrateAppliesEachStepOnce(t *testing.T) {
	ctx := context.Background()
	db := dbtest.Open(t)
	r := &recorder{}
	migs := []store.Migration{
		r.step("a", 1, exec("CREATE TABLE a_things (id INTEGER PRIMARY KEY)")),
		r.step("a", 2, exec("ALTER TABLE a_things ADD COLUMN name TEXT")),
		r.step("b", 1, nil),
	}
	if err := store.Migrate(ctx, db, migs); err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	if err := store.Migrate(ctx, db, migs); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if diff := cmp.Diff([]string{"a/1", "a/2", "b/1"}, r.ran); diff != "" {
		t.Errorf("steps run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 2, "b": 1}, versions(t, db)); diff != "" {
		t.Errorf("Versions (-want +got):\n%s", diff)
	}

	// A binary that knows one more step runs only that one.
	r.ran = nil
	migs = append(migs, r.step("a", 3, exec("CREATE INDEX idx_a_name ON a_things (name)")))
	if err := store.Migrate(ctx, db, migs); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	if diff := cmp.Diff([]string{"a/3"}, r.ran); diff != "" {
		t.Errorf("steps run by the upgrade (-want +got):\n%s", diff)
	}
	if got := versions(t, db)["a"]; got != 3 {
		t.Errorf("version of a = %d, want 3", got)
	}
}

func TestMigrateOrder(t *testing.T) {
	db := dbtest.Open(t)
	r := &recorder{}
	// Components run in the order they are first listed; their steps by
	// version, whatever order the caller listed them in.
	migs := []store.Migration{
		r.step("journal", 2, nil),
		r.step("character", 1, nil),
		r.step("journal", 1, nil),
		r.step("character", 3, nil),
		r.step("character", 2, nil),
		r.step("sleep", 1, nil),
	}
	if err := store.Migrate(context.Background(), db, migs); err != nil {
		t.Fatal(err)
	}
	want := []string{"journal/1", "journal/2", "character/1", "character/2", "character/3", "sleep/1"}
	if diff := cmp.Diff(want, r.ran); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestMigrateRollsBackAFailingStep(t *testing.T) {
	ctx := context.Background()
	db := dbtest.Open(t)
	boom := errors.New("boom")
	r := &recorder{}
	migs := []store.Migration{
		r.step("a", 1, exec("CREATE TABLE kept (id INTEGER PRIMARY KEY)")),
		r.step("a", 2, func(tx *gorm.DB) error {
			if err := tx.Exec("CREATE TABLE half (id INTEGER PRIMARY KEY)").Error; err != nil {
				return err
			}
			if err := tx.Exec("INSERT INTO kept (id) VALUES (1)").Error; err != nil {
				return err
			}
			return boom
		}),
		r.step("a", 3, exec("CREATE TABLE never (id INTEGER PRIMARY KEY)")),
	}
	err := store.Migrate(ctx, db, migs)
	if !errors.Is(err, boom) {
		t.Fatalf("Migrate = %v, want it to wrap the step's error", err)
	}
	if diff := cmp.Diff([]string{"a/1", "a/2"}, r.ran); diff != "" {
		t.Errorf("steps run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1}, versions(t, db)); diff != "" {
		t.Errorf("Versions after the failure (-want +got):\n%s", diff)
	}
	if !tableExists(t, db, "kept") {
		t.Errorf("the step before the failure was rolled back")
	}
	if tableExists(t, db, "half") || tableExists(t, db, "never") {
		t.Errorf("tables of the failed or later steps exist")
	}
	var n int64
	if err := db.Raw("SELECT count(*) FROM kept").Scan(&n).Error; err != nil || n != 0 {
		t.Errorf("rows inserted by the failed step: %d (%v), want 0", n, err)
	}

	// Once fixed, the step runs and the rest follow.
	r.ran = nil
	migs[1] = r.step("a", 2, exec("CREATE TABLE half (id INTEGER PRIMARY KEY)"))
	if err := store.Migrate(ctx, db, migs); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a/2", "a/3"}, r.ran); diff != "" {
		t.Errorf("steps run after the fix (-want +got):\n%s", diff)
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	db := dbtest.Open(t)
	r := &recorder{}
	newer := []store.Migration{r.step("a", 1, nil), r.step("a", 2, nil), r.step("a", 3, nil)}
	if err := store.Migrate(ctx, db, newer); err != nil {
		t.Fatal(err)
	}

	r.ran = nil
	older := []store.Migration{r.step("b", 1, nil), r.step("a", 1, nil), r.step("a", 2, nil)}
	err := store.Migrate(ctx, db, older)
	if !errors.Is(err, store.ErrSchemaNewer) {
		t.Fatalf("Migrate with an older binary = %v, want ErrSchemaNewer", err)
	}
	if len(r.ran) != 0 {
		t.Errorf("an older binary ran steps %v on a newer schema", r.ran)
	}
	if diff := cmp.Diff(map[string]int{"a": 3}, versions(t, db)); diff != "" {
		t.Errorf("Versions (-want +got):\n%s", diff)
	}

	// A component this binary does not know at all is not its concern.
	r.ran = nil
	if err := store.Migrate(ctx, db, []store.Migration{r.step("c", 1, nil)}); err != nil {
		t.Fatalf("Migrate of an unrelated component: %v", err)
	}
	if diff := cmp.Diff([]string{"c/1"}, r.ran); diff != "" {
		t.Errorf("steps run (-want +got):\n%s", diff)
	}
}

func TestVersionsOfAnEmptyDatabase(t *testing.T) {
	db := dbtest.Open(t)
	if err := store.Migrate(context.Background(), db, nil); err != nil {
		t.Fatal(err)
	}
	if got := versions(t, db); len(got) != 0 {
		t.Errorf("Versions = %v, want none", got)
	}
	if !tableExists(t, db, "schema_migrations") {
		t.Errorf("Migrate did not create schema_migrations")
	}
}

// A step's dialect part runs on its dialect only, after the common part,
// and the version is recorded alike on both.
func TestMigrateRunsTheDialectsOwnPart(t *testing.T) {
	db := dbtest.Open(t)
	var ran []string
	note := func(s string) func(*gorm.DB) error {
		return func(*gorm.DB) error { ran = append(ran, s); return nil }
	}
	migs := []store.Migration{{Component: "d", Version: 1, Name: "d", Up: note("up"), SQLite: note("sqlite"), Postgres: note("postgres")},
		{Component: "d", Version: 2, Name: "only a dialect part", Postgres: note("postgres 2")}}
	if err := store.Migrate(context.Background(), db, migs); err != nil {
		t.Fatal(err)
	}
	want := []string{"up", "sqlite"}
	if dbtest.Dialect() == store.DriverPostgres {
		want = []string{"up", "postgres", "postgres 2"}
	}
	if diff := cmp.Diff(want, ran); diff != "" {
		t.Errorf("parts run (-want +got):\n%s", diff)
	}
	if got := versions(t, db); got["d"] != 2 {
		t.Errorf("Versions = %v, want d at 2", got)
	}
}

// Exec runs its statements in order and stops at the first that fails:
// those after it never run.
func TestExecRunsInOrderUpToAFailure(t *testing.T) {
	db := dbtest.Open(t)
	if err := store.Exec(db, "CREATE TABLE exec_a (n INTEGER)", "INSERT INTO exec_a (n) VALUES (1)", "INSERT INTO exec_a (n) VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	err := store.Exec(db, "INSERT INTO exec_a (n) VALUES (3)", "INSERT INTO exec_missing (n) VALUES (4)", "CREATE TABLE exec_b (n INTEGER)")
	if err == nil {
		t.Fatal("a failing statement gave no error")
	}
	if tableExists(t, db, "exec_b") {
		t.Fatal("a statement after the failing one ran")
	}
	var ns []int
	if err := db.Raw("SELECT n FROM exec_a ORDER BY n").Scan(&ns).Error; err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(ns, []int{1, 2, 3}) {
		t.Fatalf("rows %v, want 1, 2, 3 (the statements before the failure)", ns)
	}
}
