package character

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/store"
)

// MaxPreparedRows bounds the rows a prepared multi-row insert writes: one
// statement text per row count is prepared, so a larger insert (rare: a
// tick writes a few messages) runs the ordinary way.
const MaxPreparedRows = 8

// messageColumns are the columns gorm writes for a new Message, in its
// order; messageArgs gives the values in the same order.
var messageColumns = []string{"character_id", "state", "role", "summary", "content", "name", "tool_calls", "tool_call_id", "tool_name",
	"turn", "tick", "tokens", "view_tokens", "mask_tokens", "masked", "offloaded", "compaction_id", "event_refs", "metadata", "game_time", "created_at"}

func messageArgs(args []any, m *Message) []any {
	return append(args, m.CharacterID, m.State, m.Role, m.Summary, m.Content, m.Name, m.ToolCalls, m.ToolCallID, m.ToolName,
		m.Turn, m.Tick, m.Tokens, m.ViewTokens, m.MaskTokens, m.Masked, m.Offloaded, m.CompactionID, m.EventRefs, m.Metadata,
		m.GameTime, m.CreatedAt)
}

// insertMessagesSQL[n] inserts n messages (SQLite), 1 ≤ n ≤ MaxPreparedRows.
var insertMessagesSQL = func() (out [MaxPreparedRows + 1]string) {
	for n := 1; n <= MaxPreparedRows; n++ {
		out[n] = store.InsertSQL("messages", messageColumns, n, "RETURNING `id`")
	}
	return out
}()

// insertMessages inserts msgs as they are through a prepared statement
// inside an SQLite transaction, setting their ids, and reports false when
// it cannot (then nothing was written and the caller inserts them the
// ordinary way).
func (s *Store) insertMessages(ctx context.Context, db *gorm.DB, msgs []*Message) (bool, error) {
	if len(msgs) > MaxPreparedRows {
		return false, nil
	}
	st, ok := s.prep.Stmt(ctx, db, insertMessagesSQL[len(msgs)])
	if !ok {
		return false, nil
	}
	return true, scanInserted(ctx, st, len(msgs), func(args []any, i int) []any { return messageArgs(args, msgs[i]) },
		func(i int) *int64 { return &msgs[i].ID })
}

// insertArgs are argument lists of the prepared multi-row inserts
// (scanInserted), reused: a tick's insert of messages passes some sixty
// values.
var insertArgs = sync.Pool{New: func() any {
	a := make([]any, 0, MaxPreparedRows*len(messageColumns))
	return &a
}}

// insertEventSQL stores one event unless its ref was seen (SQLite),
// returning its seq only when it was stored.
var insertEventSQL = store.InsertSQL("events", []string{"character_id", "ref", "kind", "actor", "actor_id", "target", "text", "room",
	"at", "received_at", "consumed_at", "consumed_tick", "message_id"}, 1, "ON CONFLICT DO NOTHING RETURNING `seq`")

// insertEvent stores e as it is through a prepared statement inside an
// SQLite transaction and reports whether it was stored (false: its ref
// was seen before); prepared is false when no statement could be used,
// then nothing was written.
func (s *Store) insertEvent(ctx context.Context, tx *gorm.DB, e *Event) (stored, prepared bool, err error) {
	st, ok := s.prep.Stmt(ctx, tx, insertEventSQL)
	if !ok {
		return false, false, nil
	}
	err = st.QueryRowContext(ctx, e.CharacterID, e.Ref, e.Kind, e.Actor, e.ActorID, e.Target, e.Text, e.Room, e.At, e.ReceivedAt,
		e.ConsumedAt, e.ConsumedTick, e.MessageID).Scan(&e.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return false, true, nil
	}
	return err == nil, true, err
}

// inboxSQL counts NPC id's pending events, and returns no row when the NPC
// does not exist. It runs in SQLite's syntax and, with FOR SHARE, in
// PostgreSQL's.
const inboxSQL = "SELECT (SELECT count(*) FROM events WHERE events.character_id = characters.id AND consumed_at IS NULL) FROM characters WHERE id = ?"

// bornSQL reads when NPC id was created (SQLite, which locks by
// transaction, not by row).
const bornSQL = "SELECT `created_at` FROM `characters` WHERE id = ? LIMIT 1"

// bornPrepared is lockRow through a prepared statement inside an SQLite
// transaction; ok is false when none could be used.
func (s *Store) bornPrepared(ctx context.Context, id string) (born time.Time, ok bool, err error) {
	st, ok := s.prep.Stmt(ctx, s.db, bornSQL)
	if !ok {
		return time.Time{}, false, nil
	}
	err = st.QueryRowContext(ctx, id).Scan(&born)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, true, fmt.Errorf("%w: npc %q does not exist", ErrNotFound, id)
	}
	if err != nil {
		return time.Time{}, true, fmt.Errorf("load npc %q: %w", id, err)
	}
	return born, true, nil
}
