package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/store"
)

type sqlStateErr string

func (e sqlStateErr) Error() string    { return "pg error " + string(e) }
func (e sqlStateErr) SQLState() string { return string(e) }

func TestTransactionRetriesOnlyWhatPostgreSQLAborted(t *testing.T) {
	db := dbtest.Open(t)
	for _, tt := range []struct {
		err   error
		tries int
	}{
		{nil, 1},
		{errors.New("plain"), 1},
		{sqlStateErr("23505"), 1},
		{fmt.Errorf("wrapped: %w", sqlStateErr("40P01")), 3},
		{sqlStateErr("40001"), 3},
	} {
		tries := 0
		err := store.Transaction(context.Background(), db, func(*gorm.DB) error { tries++; return tt.err })
		if tries != tt.tries || !errors.Is(err, tt.err) {
			t.Errorf("%v: %d tries, error %v; want %d tries and the error", tt.err, tries, err, tt.tries)
		}
	}
}
