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
