package journal_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/store"
)

// TestUpgradeFromFrozenSchema opens a database as the first release left it
// (testdata/schema-v1.sql: no memories, no full-text indexes), applies
// today's migrations, and checks that nothing was lost and that what the
// upgrade adds works on the old rows: the archived message is found again.
func TestUpgradeFromFrozenSchema(t *testing.T) {
	ctx := context.Background()
	dump, err := os.ReadFile(filepath.Join("testdata", "schema-v1.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "old.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	for _, stmt := range strings.Split(string(dump), ";\n") {
		var lines []string
		for _, l := range strings.Split(stmt, "\n") {
			if !strings.HasPrefix(l, "--") {
				lines = append(lines, l)
			}
		}
		if s := strings.TrimSpace(strings.Join(lines, "\n")); s != "" {
			if err := db.Exec(s).Error; err != nil {
				t.Fatalf("loading the frozen schema: %v\n%s", err, s)
			}
		}
	}
	if err := store.Migrate(ctx, db, append(character.Migrations(), journal.Migrations()...)); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	got, err := store.Versions(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"character": len(character.Migrations()), "journal": len(journal.Migrations())}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("versions after the upgrade (-want +got):\n%s", diff)
	}
	chars := character.NewStore(db)
	c, err := chars.Get(ctx, "brom")
	if err != nil || c.Name != "Brom" || c.State.Compactions != 1 {
		t.Fatalf("the NPC after the upgrade: %+v %v", c, err)
	}
	if c.Compaction.Target != character.DefaultCompactionTarget || c.Validate() != nil {
		t.Fatalf("an NPC of the old schema gets the default compaction target: %v (%v)", c.Compaction.Target, c.Validate())
	}
	ms, err := chars.History(ctx, "brom", character.HistoryQuery{})
	if err != nil || len(ms) != 4 || ms[0].State != character.StateArchived {
		t.Fatalf("history after the upgrade: %d messages, %v", len(ms), err)
	}
	r, err := journal.NewRetriever(journal.NewStore(db))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := r.Search(ctx, "brom", "where is the iron key?", 3)
	if err != nil || len(rs) == 0 || !strings.Contains(rs[0].Content, "iron key") {
		t.Fatalf("search over the upgraded rows: %+v %v", rs, err)
	}
	if _, err := journal.NewStore(db).AddMemory(ctx, "brom", &journal.Memory{Content: "alice buried the iron key under the old oak", Entity: "alice", Key: "key"}); err != nil {
		t.Fatalf("memories on the upgraded database: %v", err)
	}
}
