package tick

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
)

// tickGroup puts an NPC for each id in env, posts it an event and ticks
// them all at once, their commits held until all are queued so that they
// commit in one group (on SQLite). keys[i], when set, is tick i's
// idempotency key; model is the NPCs' model ("" for the builtin one).
func tickGroup(t *testing.T, env *testEnv, model string, ids, keys []string) ([]*Result, []error) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		c := brom()
		c.ID, c.Name, c.Model = id, "Smith "+id, model
		if _, err := env.eng.PutNPC(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, _, err := env.eng.PostEvents(ctx, id, []EventInput{{ID: "e-" + id, Kind: "say", Actor: "alice", Text: "Good morning, " + id + "! I lost my sword."}}); err != nil {
			t.Fatal(err)
		}
	}
	release := func() {}
	if env.eng.commits.grouped {
		var waitQueued func(int)
		waitQueued, release = holdCommitter(t, env.eng.commits)
		go func() { waitQueued(len(ids)); release() }()
	}
	results := make([]*Result, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = env.eng.TickWithKey(ctx, id, keys[i])
		}()
	}
	wg.Wait()
	release()
	return results, errs
}

// The ticks of a group consume their events and store their tick records
// and outcomes with one statement each, after every other write of the
// group (the outcomes last), and each NPC finds its events consumed, its
// record and its answer as if it had committed alone.
func TestGroupStoresItsLateRowsTogether(t *testing.T) {
	env, log := countingEnv(t)
	ctx := context.Background()
	ids := []string{"npc-0", "npc-1", "npc-2", "npc-3", "npc-4"}
	keys := []string{"", "k-1", "", "k-3", ""}
	log.reset()
	results, errs := tickGroup(t, env, "", ids, keys)
	for i, id := range ids {
		if errs[i] != nil {
			t.Fatalf("%s: %v", id, errs[i])
		}
		res := results[i]
		if res.NPC != id || res.Tick != 1 || res.Idle {
			t.Fatalf("%s: result %+v, want its tick 1", id, res)
		}
		recs, err := env.chars.Ticks(ctx, id, 0, 0)
		if err != nil || len(recs) != 1 {
			t.Fatalf("%s: tick records %+v, %v; want one", id, recs, err)
		}
		rec := recs[0]
		msgs, err := env.chars.LiveMessages(ctx, id)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("%s: messages %v, %v", id, msgs, err)
		}
		c, err := env.chars.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Tick != 1 || rec.FirstMessageID != msgs[0].ID || rec.LastMessageID != msgs[len(msgs)-1].ID ||
			rec.ContextTokens != c.ContextTokens() || rec.Actions != len(res.Actions) || rec.ID == 0 {
			t.Errorf("%s: record %+v; want tick 1 over messages %d-%d, %d context tokens, %d actions", id, rec,
				msgs[0].ID, msgs[len(msgs)-1].ID, c.ContextTokens(), len(res.Actions))
		}
		evs, err := env.chars.EventsByRef(ctx, id, []string{"e-" + id})
		if err != nil || len(evs) != 1 {
			t.Fatalf("%s: events %+v, %v", id, evs, err)
		}
		if ev := evs[0]; ev.ConsumedAt == nil || ev.ConsumedTick != 1 || ev.MessageID == nil || *ev.MessageID != msgs[0].ID || msgs[0].Role != llm.RoleUser {
			t.Errorf("%s: event %+v; want it consumed by tick 1 into message %d (%s)", id, ev, msgs[0].ID, msgs[0].Role)
		}
		stored, err := env.eng.Outcome(ctx, id, 1)
		if err != nil {
			t.Fatalf("%s: outcome: %v", id, err)
		}
		if a, b := answerJSON(t, stored), answerJSON(t, res); a != b {
			t.Errorf("%s: stored outcome\n%s\nwant the answer given\n%s", id, a, b)
		}
		if keys[i] != "" {
			o, err := env.chars.OutcomeByKey(ctx, id, keys[i])
			if err != nil || o.Tick != 1 {
				t.Errorf("%s: outcome under %q: %+v, %v", id, keys[i], o, err)
			}
		}
	}
	if !env.eng.commits.grouped {
		return
	}
	if got := env.eng.commits.largestGroup(); got != len(ids) {
		t.Fatalf("largest group %d, want the %d ticks together", got, len(ids))
	}
	stmts, _ := log.taken()
	lastWrite, consumed, records, outcomes := -1, 0, 0, 0
	for i, s := range stmts {
		switch {
		case strings.HasPrefix(s, "UPDATE `events` SET `consumed_at`"):
			consumed++
			lastWrite = max(lastWrite, i)
		case strings.HasPrefix(s, "INSERT INTO `tick_records`"):
			records++
		case strings.HasPrefix(s, "INSERT INTO `tick_outcomes`"):
			outcomes++
			if i < lastWrite {
				t.Errorf("the outcomes were stored before statement %d: %s", lastWrite, stmts[lastWrite])
			}
			lastWrite = i
		case strings.HasPrefix(s, "INSERT") || strings.HasPrefix(s, "UPDATE") || strings.HasPrefix(s, "DELETE"):
			if outcomes > 0 {
				t.Errorf("a write after the outcomes: %s", s)
			}
			lastWrite = max(lastWrite, i)
		}
	}
	if consumed != 1 || records != 1 || outcomes != 1 {
		t.Errorf("%d consumptions of events, %d inserts of tick records and %d of outcomes for a group of %d ticks, want one each:\n%s",
			consumed, records, outcomes, len(ids), strings.Join(stmts, "\n"))
	}
}

// meddler is a model that, during the first tick of the NPC named name,
// runs meddle: what another daemon could do meanwhile.
type meddler struct {
	llm.Chatter
	name   string
	meddle func()
	once   sync.Once
}

func (m *meddler) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if req.Task == llm.TaskTick && len(req.Messages) > 0 && strings.Contains(req.Messages[0].Content, m.name) {
		m.once.Do(m.meddle)
	}
	return m.Chatter.Chat(ctx, req)
}

// When the rows a group stores last fail for one of its ticks (its key
// was answered by another process meanwhile), that tick alone stores
// nothing and gives the answer already stored; the others commit whole.
func TestGroupSurvivesAnOutcomeRefusedAtItsEnd(t *testing.T) {
	m := &meddler{Chatter: llm.NewBuiltin(), name: "Smith npc-2"}
	env := openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), m)
	ctx := context.Background()
	ids := []string{"npc-0", "npc-1", "npc-2", "npc-3"}
	keys := []string{"k", "k", "k", "k"}
	theirs := `{"npc":"npc-2","tick":1,"idle":false,"events":1,"actions":[{"call_id":"other","tool":"say","args":{"text":"answered elsewhere"}}]}`
	stole := false
	m.meddle = func() {
		stole = true
		key := "k"
		o := &character.TickOutcome{CharacterID: "npc-2", Tick: 1, Key: &key, At: time.Now().UTC(), Body: theirs}
		if err := env.chars.AddOutcome(ctx, o); err != nil {
			t.Errorf("store the other answer: %v", err)
		}
	}
	results, errs := tickGroup(t, env, "remote-model", ids, keys)
	if !stole {
		t.Fatal("the model was never called for npc-2's tick")
	}
	for i, id := range ids {
		if errs[i] != nil {
			t.Fatalf("%s: %v", id, errs[i])
		}
		records, st, pending := storedTurn(t, env, id)
		if id == "npc-2" {
			var want Result
			if err := json.Unmarshal([]byte(theirs), &want); err != nil {
				t.Fatal(err)
			}
			if a, b := answerJSON(t, results[i]), answerJSON(t, &want); a != b {
				t.Errorf("%s: answer\n%s\nwant the one stored under its key\n%s", id, a, b)
			}
			if records != 0 || st.Tick != 0 || st.LiveMessages != 0 || pending != 1 {
				t.Errorf("%s: %d tick records, state %+v, %d events pending; want nothing of its turn stored", id, records, st, pending)
			}
			continue
		}
		if records != 1 || st.Tick != 1 || pending != 0 || results[i].Tick != 1 || results[i].NPC != id {
			t.Errorf("%s: %d tick records, tick %d, %d events pending, result %+v; want its turn committed", id, records, st.Tick, pending, results[i])
		}
		if o, err := env.chars.OutcomeByKey(ctx, id, "k"); err != nil || o.Tick != 1 {
			t.Errorf("%s: outcome under its key %+v, %v", id, o, err)
		}
	}
}

// When the events of one tick of a group were consumed by another daemon
// meanwhile, that tick fails and stores nothing; the others commit whole.
func TestGroupSurvivesAnEventConsumedElsewhere(t *testing.T) {
	m := &meddler{Chatter: llm.NewBuiltin(), name: "Smith npc-1"}
	env := openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), m)
	ctx := context.Background()
	ids := []string{"npc-0", "npc-1", "npc-2"}
	m.meddle = func() {
		evs, err := env.chars.EventsByRef(ctx, "npc-1", []string{"e-npc-1"})
		if err == nil && len(evs) == 1 {
			err = env.chars.ConsumeEvents(ctx, "npc-1", []int64{evs[0].Seq}, 7, 0)
		}
		if err != nil {
			t.Errorf("consume npc-1's event elsewhere: %v", err)
		}
	}
	results, errs := tickGroup(t, env, "remote-model", ids, make([]string, len(ids)))
	for i, id := range ids {
		records, st, pending := storedTurn(t, env, id)
		if id == "npc-1" {
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "already consumed") {
				t.Errorf("%s: %+v, %v; want its tick refused", id, results[i], errs[i])
			}
			if records != 0 || st.Tick != 0 || st.LiveMessages != 0 || pending != 0 {
				t.Errorf("%s: %d tick records, state %+v, %d events pending; want nothing of its turn stored (its event consumed elsewhere)", id, records, st, pending)
			}
			if _, err := env.eng.Outcome(ctx, id, 1); err == nil {
				t.Errorf("%s: an outcome of tick 1 was stored", id)
			}
			continue
		}
		if errs[i] != nil || records != 1 || st.Tick != 1 || pending != 0 {
			t.Errorf("%s: %v, %d tick records, tick %d, %d events pending; want its turn committed", id, errs[i], records, st.Tick, pending)
		}
	}
}

// answerJSON is r as an outcome stores it.
func answerJSON(t *testing.T, r *Result) string {
	t.Helper()
	o, err := outcomeOf(r, "", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return o.Body
}

// storedTurn is what NPC id has stored of its ticks: their records, its
// state and how many of its events are pending.
func storedTurn(t *testing.T, env *testEnv, id string) (records int, st character.State, pending int) {
	t.Helper()
	ctx := context.Background()
	recs, err := env.chars.Ticks(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := env.chars.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if pending, err = env.chars.PendingCount(ctx, id); err != nil {
		t.Fatal(err)
	}
	return len(recs), c.State, pending
}

// A committer whose members leave rows with no writer for them fails the
// commit instead of dropping them.
func TestCommitterRefusesLateRowsWithoutAWriter(t *testing.T) {
	env := openEnv(t, filepath.Join(t.TempDir(), "npcd.db"), nil)
	c := newCommitter(env.eng.deps.DB, nil, nil)
	err := c.commit(context.Background(), func(_ context.Context, _ *gorm.DB, late *lateRows) error {
		late.ticks = append(late.ticks, &character.TickRecord{CharacterID: "brom", Tick: 1})
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "no writer") {
		t.Fatalf("commit with late rows and no writer: %v, want an error", err)
	}
	if recs, err := env.chars.Ticks(context.Background(), "brom", 0, 0); err != nil || len(recs) != 0 {
		t.Errorf("tick records %+v, %v; want none", recs, err)
	}
}
