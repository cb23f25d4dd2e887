package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/npcd/npcd/store"
)

type row struct {
	ID   int64 `gorm:"primaryKey"`
	Name string
}

// A Prepared handle answers as the database does, for the statements it
// keeps and past its bound; writes, transactions and schema changes after
// a statement was prepared all work.
func TestPreparedAnswersAsTheDatabase(t *testing.T) {
	db, _ := openFile(t)
	ctx := context.Background()
	if err := db.AutoMigrate(&row{}); err != nil {
		t.Fatal(err)
	}
	h := store.Prepared(db)
	for i := 1; i <= 3; i++ {
		if err := h.WithContext(ctx).Create(&row{ID: int64(i), Name: fmt.Sprint("r", i)}).Error; err != nil {
			t.Fatal(err)
		}
	}
	get := func(id int64) string {
		t.Helper()
		var rs []row
		if err := h.WithContext(ctx).Where("id = ?", id).Find(&rs).Error; err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 {
			return ""
		}
		return rs[0].Name
	}
	if got := get(2); got != "r2" {
		t.Errorf("row 2 = %q, want r2", got)
	}
	err := h.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return tx.Model(&row{}).Where("id = ?", 2).Update("name", "two").Error
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := get(2); got != "two" {
		t.Errorf("row 2 after the transaction = %q, want two", got)
	}
	// A column added after the statement was prepared: SQLite prepares it
	// again by itself.
	if err := db.Exec("ALTER TABLE rows ADD COLUMN extra TEXT").Error; err != nil {
		t.Fatal(err)
	}
	if got := get(3); got != "r3" {
		t.Errorf("row 3 after a schema change = %q, want r3", got)
	}
	// Past the bound of kept statements, statements still run.
	for i := 0; i < 300; i++ {
		var n int64
		if err := h.WithContext(ctx).Model(&row{}).Where(fmt.Sprintf("id > %d", -i)).Count(&n).Error; err != nil || n != 3 {
			t.Fatalf("statement %d: %d rows, %v", i, n, err)
		}
	}
	if got := get(1); got != "r1" {
		t.Errorf("row 1 = %q, want r1", got)
	}
	// Padded IN lists match the same rows.
	var rs []row
	if err := h.WithContext(ctx).Where("id IN ?", store.PadIn([]int64{1, 3, 2})).Order("id").Find(&rs).Error; err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Errorf("padded IN found %d rows, want 3", len(rs))
	}
}

func TestPadIn(t *testing.T) {
	for _, tc := range []struct{ in, want []int }{
		{nil, nil},
		{[]int{7}, []int{7}},
		{[]int{1, 2}, []int{1, 2}},
		{[]int{1, 2, 3}, []int{1, 2, 3, 3}},
		{[]int{1, 2, 3, 4, 5}, []int{1, 2, 3, 4, 5, 5, 5, 5}},
	} {
		if diff := cmp.Diff(tc.want, store.PadIn(tc.in)); diff != "" {
			t.Errorf("PadIn(%v) (-want +got):\n%s", tc.in, diff)
		}
	}
}

// Stmt hands out the statement a Prepared handle keeps, once per text, and
// nothing for a handle that keeps none.
func TestStmtIsKeptOnThePreparedHandle(t *testing.T) {
	db, _ := openFile(t)
	ctx := context.Background()
	if err := db.AutoMigrate(&row{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Create(&row{ID: 1, Name: "r1"}).Error; err != nil {
		t.Fatal(err)
	}
	if st := store.Stmt(ctx, db, "SELECT name FROM rows WHERE id = ?"); st != nil {
		t.Fatal("Stmt on a plain handle returned a statement")
	}
	h := store.Prepared(db)
	const q = "SELECT name FROM rows WHERE id = ?"
	st := store.Stmt(ctx, h, q)
	if st == nil {
		t.Fatal("Stmt on a Prepared handle returned nil")
	}
	if again := store.Stmt(ctx, h.WithContext(ctx), q); again != st {
		t.Error("Stmt prepared the same text twice")
	}
	var name string
	if err := st.QueryRowContext(ctx, 1).Scan(&name); err != nil || name != "r1" {
		t.Fatalf("prepared read = %q, %v; want r1", name, err)
	}
	err := h.Transaction(func(tx *gorm.DB) error {
		if st := store.Stmt(ctx, tx, q); st != nil {
			t.Error("Stmt inside a transaction returned a statement")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
