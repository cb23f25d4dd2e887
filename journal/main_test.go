package journal

import (
	"os"
	"testing"

	"github.com/npcd/npcd/internal/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }
