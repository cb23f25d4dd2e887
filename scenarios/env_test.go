package scenarios

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/testdb"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tick"
	"github.com/npcd/npcd/tools"
)

// testClock is a game clock without a sleep schedule: sleeps happen only
// in sleep steps. (cmd/npcd runs scenarios with the real schedule.)
type testClock struct {
	*clockwork.FakeClock
}

func (c testClock) Advance(_ context.Context, d time.Duration) ([]*sleep.Report, error) {
	c.FakeClock.Advance(d)
	return nil, nil
}

// testEnv wires an engine over a fresh SQLite file for sc, as tick's own
// tests do, with the scripted model as the remote one when model is
// scripted.
func testEnv(t *testing.T, sc *Scenario, model string) Env {
	t.Helper()
	db := testdb.Open(t)
	clock := testClock{clockwork.NewFakeClockAt(sc.Start)}
	chars := character.NewStore(db)
	jour := journal.NewStore(db)
	builtin := llm.NewBuiltin()
	var remote llm.Chatter
	if model == ModelScripted {
		remote = NewScripted(sc.Script, builtin)
	}
	comp, err := sleep.NewCompactor(sleep.CompactorDeps{DB: db, Characters: chars, Journal: jour, Remote: remote, Builtin: builtin, Clock: clock}, sleep.CompactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := sleep.NewConsolidator(sleep.ConsolidatorDeps{DB: db, Characters: chars, Journal: jour, Remote: remote, Builtin: builtin, Clock: clock}, sleep.ConsolidatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ret, err := journal.NewRetriever(jour)
	if err != nil {
		t.Fatal(err)
	}
	locks := tick.NewLocks()
	sleeps, err := sleep.NewRunner(sleep.RunnerDeps{DB: db, Characters: chars, Journal: jour, Lock: locks, Compactor: comp, Consolidator: cons, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := tick.New(tick.Deps{DB: db, Characters: chars, Journal: jour, Internals: tools.NewInternals(ret, chars), Retriever: ret,
		Remote: remote, Builtin: builtin, Compactor: comp, Locks: locks, Sleeper: sleeps, Owners: []tick.Owner{jour, comp}, Clock: clock}, tick.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	return Env{Engine: eng, Characters: chars, Journal: jour, Compactions: comp, Memory: ret, Clock: clock}
}

// runText parses and runs a scenario given as text.
func runText(t *testing.T, text string) *Report {
	t.Helper()
	sc, err := Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	model, err := ModelFor(sc, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), sc, testEnv(t, sc, model), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
