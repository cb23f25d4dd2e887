package sleep

import (
	"os"
	"testing"

	"github.com/npcd/npcd/internal/dbtest"
)

// The tests that use a database run on SQLite and, with
// NPCD_TEST_POSTGRES, again on PostgreSQL.
func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }
