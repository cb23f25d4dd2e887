package store_test

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/store"
)

// TestTxStmtsRunInsideSQLiteTransactions checks that a prepared statement
// is offered only inside an SQLite transaction, runs there (its writes
// committed or rolled back with the transaction), and is the same one in
// every later transaction.
func TestTxStmtsRunInsideSQLiteTransactions(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	if err := db.Exec("CREATE TABLE p (n INTEGER NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	var p store.TxStmts
	const insert = "INSERT INTO p (n) VALUES (?)"
	if _, ok := p.Stmt(ctx, db, insert); ok {
		t.Error("a statement was offered outside a transaction")
	}
	for i, keep := range []bool{true, false, true} {
		err := db.Transaction(func(tx *gorm.DB) error {
			st, ok := p.Stmt(ctx, tx, insert)
			if !ok {
				t.Fatal("no statement inside an SQLite transaction")
			}
			if _, err := st.ExecContext(ctx, i); err != nil {
				return err
			}
			if !keep {
				return gorm.ErrInvalidData // rolls back
			}
			return nil
		})
		if keep && err != nil {
			t.Fatal(err)
		}
	}
	var got []int
	if err := db.Raw("SELECT n FROM p ORDER BY n").Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("rows %v, want [0 2]: the rolled back insert must not stay", got)
	}
	if n := p.Len(); n != 1 {
		t.Errorf("%d statements prepared, want 1 reused by every transaction", n)
	}

	// PostgreSQL runs its statements the ordinary way.
	if pg := dbtest.Open(t); !store.IsSQLite(pg) {
		pg.Transaction(func(tx *gorm.DB) error {
			if _, ok := p.Stmt(ctx, tx, "SELECT 1"); ok {
				t.Error("a statement was offered on PostgreSQL")
			}
			return nil
		})
	}
}

// ScanReturned scans each row an insert returns into the places its
// function gives for that row, and fails when the insert returns another
// number of rows than it was told (the rows are still written: the
// caller's transaction undoes them). ScanIDs scans ids alone.
func TestScanReturned(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	if err := db.Exec("CREATE TABLE r (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlDB.PrepareContext(ctx, "INSERT INTO r (n) VALUES (?), (?) RETURNING id, n * 10")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ids, tens [2]int64
	err = store.ScanReturned(ctx, st, []any{4, 7}, 2, func(i int) []any { return []any{&ids[i], &tens[i]} })
	if err != nil || ids[0] < 1 || ids[1] != ids[0]+1 || tens != [2]int64{40, 70} {
		t.Fatalf("ScanReturned: ids %v, tens %v, %v; want two ids in order and 40, 70", ids, tens, err)
	}
	for _, n := range []int{1, 3} {
		// Places for n rows only: a row past them is never asked for.
		vals := make([]int64, 2*n)
		err := store.ScanReturned(ctx, st, []any{1, 2}, n, func(i int) []any { return []any{&vals[2*i], &vals[2*i+1]} })
		if err == nil {
			t.Errorf("ScanReturned told %d rows of an insert of 2 returned no error", n)
		}
	}
	one, err := sqlDB.PrepareContext(ctx, "INSERT INTO r (n) VALUES (?), (?) RETURNING id")
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	var a, b int64
	if err := store.ScanIDs(ctx, one, []any{5, 6}, []*int64{&a, &b}); err != nil || a < 1 || b != a+1 {
		t.Fatalf("ScanIDs: %d, %d, %v; want two ids in order", a, b, err)
	}
}
