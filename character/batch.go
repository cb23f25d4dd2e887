package character

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/store"
)

// Ticks that commit together (see tick's group commit) consume their
// events and store their tick records and outcomes together too, at the
// end of the transaction: one statement per kind for up to MaxPreparedRows
// rows instead of one per tick. On SQLite a group holds the database's
// only writer for as long as its statements run, so what a statement
// costs beside its rows is paid by every tick queued behind the group.
// Outside a transaction, and on PostgreSQL, each row is written as alone
// (AddTick, AddOutcome, ConsumeEvents): those calls are all-or-nothing
// only inside the caller's transaction.

// tickColumns are the columns AddTick and AddTicks write of a TickRecord,
// in the order of tickArgs.
var tickColumns = []string{"character_id", "tick", "at", "game_time", "context_tokens", "window", "utilization",
	"prompt_tokens", "completion_tokens", "llm_calls", "actions", "compaction_id", "recovery", "first_message_id", "last_message_id"}

func tickArgs(args []any, r *TickRecord) []any {
	return append(args, r.CharacterID, r.Tick, r.At, r.GameTime, r.ContextTokens, r.Window, r.Utilization,
		r.PromptTokens, r.CompletionTokens, r.LLMCalls, r.Actions, r.CompactionID, r.Recovery, r.FirstMessageID, r.LastMessageID)
}

// outcomeColumns are the columns AddOutcome and AddOutcomes write of a
// TickOutcome, in the order of outcomeArgs.
var outcomeColumns = []string{"character_id", "tick", "key", "idle", "at", "body"}

func outcomeArgs(args []any, o *TickOutcome) []any {
	return append(args, o.CharacterID, o.Tick, o.Key, o.Idle, o.At, o.Body)
}

// insertTicksSQL[n] and insertOutcomesSQL[n] insert n rows (SQLite),
// 1 ≤ n ≤ MaxPreparedRows, returning their ids.
var insertTicksSQL, insertOutcomesSQL = func() (ticks, outcomes [MaxPreparedRows + 1]string) {
	for n := 1; n <= MaxPreparedRows; n++ {
		ticks[n] = store.InsertSQL("tick_records", tickColumns, n, "RETURNING `id`")
		outcomes[n] = store.InsertSQL("tick_outcomes", outcomeColumns, n, "RETURNING `id`")
	}
	return ticks, outcomes
}()

// AddTicks records the non-idle ticks rs, setting their ids, as AddTick
// does each.
func (s *Store) AddTicks(ctx context.Context, rs []*TickRecord) error {
	if len(rs) == 1 {
		return s.AddTick(ctx, rs[0])
	}
	err := s.insertRows(ctx, len(rs), insertTicksSQL[:],
		func(args []any, i int) []any { return tickArgs(args, rs[i]) },
		func(i int) *int64 { return &rs[i].ID },
		func(i int) error { return s.AddTick(ctx, rs[i]) })
	if err != nil {
		return fmt.Errorf("record %d ticks: %w", len(rs), err)
	}
	return nil
}

// AddOutcomes stores the outcomes os, setting their ids, as AddOutcome
// does each: inside the transaction that commits their turns, as its last
// write. A key an NPC already used fails them all with ErrDuplicateKey
// (which of them holds it is told only when os holds one outcome).
func (s *Store) AddOutcomes(ctx context.Context, os []*TickOutcome) error {
	if len(os) == 1 {
		return s.AddOutcome(ctx, os[0])
	}
	err := s.insertRows(ctx, len(os), insertOutcomesSQL[:],
		func(args []any, i int) []any { return outcomeArgs(args, os[i]) },
		func(i int) *int64 { return &os[i].ID },
		func(i int) error { return s.AddOutcome(ctx, os[i]) })
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, ErrDuplicateKey) && isUniqueViolation(err):
		return fmt.Errorf("%w: one of %d outcomes", ErrDuplicateKey, len(os))
	}
	return fmt.Errorf("record %d outcomes: %w", len(os), err)
}

// insertRows inserts n rows through the prepared statements texts[k] (k
// rows each, k ≤ MaxPreparedRows), args(list, i) adding row i's values to
// a list and id(i) where its returned id goes, in as few statements as the
// bound allows. Where statements are not prepared (PostgreSQL, or outside
// a transaction) it inserts the rows one by one with one(i).
func (s *Store) insertRows(ctx context.Context, n int, texts []string, args func([]any, int) []any, id func(int) *int64, one func(int) error) error {
	if n == 0 {
		return nil
	}
	if _, ok := s.prep.Stmt(ctx, s.db, texts[1]); !ok {
		for i := range n {
			if err := one(i); err != nil {
				return err
			}
		}
		return nil
	}
	for from := 0; from < n; from += MaxPreparedRows {
		k := min(n-from, MaxPreparedRows)
		st, ok := s.prep.Stmt(ctx, s.db, texts[k])
		if !ok {
			return fmt.Errorf("insert %d rows: %w", k, gorm.ErrInvalidTransaction)
		}
		if err := scanInserted(ctx, st, k, func(list []any, i int) []any { return args(list, from+i) }, func(i int) *int64 { return id(from + i) }); err != nil {
			return err
		}
	}
	return nil
}

// scanInserted runs st, a prepared insert of k rows returning their ids,
// args(list, i) adding row i's values to its argument list and id(i) where
// row i's id goes. The list is one of insertArgs, given back emptied.
func scanInserted(ctx context.Context, st *sql.Stmt, k int, args func([]any, int) []any, id func(int) *int64) error {
	ap := insertArgs.Get().(*[]any)
	list := (*ap)[:0]
	ids := make([]*int64, k)
	for i := range k {
		list = args(list, i)
		ids[i] = id(i)
	}
	err := store.ScanIDs(ctx, st, list, ids)
	// The statement has read the arguments: the list is kept for the next
	// insert, emptied so that it holds no row's values.
	clear(list)
	*ap = list[:0]
	insertArgs.Put(ap)
	return err
}

// Consumption is what one tick consumed: events of NPC NPC (by seq),
// answered by its tick Tick in message MessageID.
type Consumption struct {
	NPC       string
	Seqs      []int64
	Tick      int64
	MessageID int64
}

// consumeAllSQL[n] marks n events consumed, each by its own tick and
// message (SQLite), 1 ≤ n ≤ MaxPreparedRows: the consumption time, then
// for each event its seq, NPC, tick and message.
var consumeAllSQL = func() (out [MaxPreparedRows + 1]string) {
	for n := 1; n <= MaxPreparedRows; n++ {
		out[n] = "UPDATE `events` SET `consumed_at`=?,`consumed_tick`=v.column3,`message_id`=v.column4 FROM (VALUES (?,?,?,?)" +
			strings.Repeat(",(?,?,?,?)", n-1) + ") AS v WHERE `events`.seq = v.column1 AND `events`.character_id = v.column2 AND `events`.consumed_at IS NULL"
	}
	return out
}()

// ConsumeAll marks the events of several ticks consumed, as ConsumeEvents
// does for each, with a statement for up to MaxPreparedRows events inside
// an SQLite transaction. It fails if any of them was already consumed
// (which tick's, it tells only when cs holds one).
func (s *Store) ConsumeAll(ctx context.Context, cs []Consumption) error {
	if len(cs) == 1 {
		c := cs[0]
		return s.ConsumeEvents(ctx, c.NPC, c.Seqs, c.Tick, c.MessageID)
	}
	type row struct {
		seq, tick, msg int64
		npc            string
	}
	var rows []row
	for _, c := range cs {
		for _, seq := range c.Seqs {
			rows = append(rows, row{seq, c.Tick, c.MessageID, c.NPC})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	if _, ok := s.prep.Stmt(ctx, s.db, consumeAllSQL[1]); !ok {
		for _, c := range cs {
			if err := s.ConsumeEvents(ctx, c.NPC, c.Seqs, c.Tick, c.MessageID); err != nil {
				return err
			}
		}
		return nil
	}
	now := time.Now().UTC()
	args := make([]any, 0, 1+4*MaxPreparedRows)
	var done int64
	for from := 0; from < len(rows); from += MaxPreparedRows {
		k := min(len(rows)-from, MaxPreparedRows)
		st, ok := s.prep.Stmt(ctx, s.db, consumeAllSQL[k])
		if !ok {
			return fmt.Errorf("consume %d events: %w", k, gorm.ErrInvalidTransaction)
		}
		args = append(args[:0], now)
		for _, r := range rows[from : from+k] {
			args = append(args, r.seq, r.npc, r.tick, r.msg)
		}
		res, err := st.ExecContext(ctx, args...)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err != nil {
			return fmt.Errorf("consume events of %d ticks: %w", len(cs), err)
		}
		done += n
	}
	if int(done) != len(rows) {
		return fmt.Errorf("consume events of %d ticks: %d of %d were already consumed", len(cs), len(rows)-int(done), len(rows))
	}
	return nil
}
