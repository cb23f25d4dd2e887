package sleep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/text"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// CompactorConfig tunes compaction. Zero fields take their defaults.
type CompactorConfig struct {
	// SummaryTimeout bounds one summarizer call; default 60s. On timeout the
	// fallback summary is used.
	SummaryTimeout time.Duration
}

// CompactorDeps are the compactor's collaborators. DB, Characters, Journal
// and Builtin are required.
type CompactorDeps struct {
	DB         *gorm.DB
	Characters *character.Store
	Journal    *journal.Store
	// Remote summarizes for NPCs whose model is not builtin; nil when no
	// endpoint is configured.
	Remote llm.Chatter
	// Builtin is the offline model: the summarizer of builtin NPCs and the
	// deterministic fallback of every NPC.
	Builtin llm.Chatter
	Clock   clockwork.Clock // default: real clock
	Log     zerolog.Logger
}

// Compactor plans, summarizes and commits compactions. It is safe for
// concurrent use; callers serialize compactions of one NPC (the tick engine
// holds the NPC's lock around Compact and Commit).
type Compactor struct {
	cfg      CompactorConfig
	db       *gorm.DB
	chars    *character.Store
	journal  *journal.Store
	models   llm.Router
	fallback llm.Chatter
	clock    clockwork.Clock
	log      zerolog.Logger
	// prep keeps the statements of a compaction's record prepared
	// (writeRecord, finishRecord): they run while the commit holds the
	// database's only writer.
	prep *store.TxStmts
}

// NewCompactor builds a compactor.
func NewCompactor(deps CompactorDeps, cfg CompactorConfig) (*Compactor, error) {
	if deps.DB == nil || deps.Characters == nil || deps.Journal == nil || deps.Builtin == nil {
		return nil, errors.New("sleep: DB, Characters, Journal and Builtin are required")
	}
	if cfg.SummaryTimeout == 0 {
		cfg.SummaryTimeout = 60 * time.Second
	}
	if cfg.SummaryTimeout < 0 {
		return nil, errors.New("sleep: SummaryTimeout must be positive")
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	return &Compactor{prep: &store.TxStmts{}, cfg: cfg, db: deps.DB, chars: deps.Characters, journal: deps.Journal,
		models: llm.Router{Remote: deps.Remote, Builtin: deps.Builtin}, fallback: deps.Builtin, clock: deps.Clock, log: deps.Log}, nil
}

// Migrations is this package's schema, in order.
func Migrations() []store.Migration {
	return []store.Migration{{
		Component: "sleep", Version: 1, Name: "compactions",
		Up: func(tx *gorm.DB) error { return tx.AutoMigrate(&Record{}) },
	}, runsMigration}
}

func (c *Compactor) modelFor(ch *character.Character) llm.Chatter {
	return c.models.Model(ch.Model)
}

// Mask masks old tool results of NPC ch per its policy (results older than
// its last keep_recent_turns turns), or with aggressive set every tool
// result before the newest turn. Exempt tools are never masked. It
// returns the NPC as masking left it (ch itself when nothing was masked).
func (c *Compactor) Mask(ctx context.Context, ch *character.Character, aggressive bool) (*character.Character, error) {
	if !ch.Masking.On() {
		return ch, nil
	}
	before := ch.State.Turn - int64(ch.Masking.KeepRecentTurns) + 1
	if aggressive {
		before = ch.State.Turn
	}
	m, err := c.chars.MaskToolResults(ctx, ch.ID, before, ch.Masking.ExemptTools.V)
	if err != nil || m.After == nil {
		return ch, err
	}
	return m.After, nil
}

// Plan plans a compaction of NPC ch from its current live history.
func (c *Compactor) Plan(ctx context.Context, ch *character.Character, trigger, instruction string) (*Plan, error) {
	live, err := c.chars.LiveMessages(ctx, ch.ID)
	if err != nil {
		return nil, err
	}
	return NewPlan(ch, live, trigger, instruction), nil
}

// Pinned returns the journal lines a plan's summary must keep: entries of
// importance ≥ PinImportance citing a message of the span.
func (c *Compactor) Pinned(ctx context.Context, p *Plan) ([]string, error) {
	ids := make([]int64, len(p.Span))
	for i, m := range p.Span {
		ids[i] = m.ID
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// An entry cites only messages written before it: those citing the
	// span are among the few citing its oldest message or a newer one,
	// found through an index however long the journal.
	lq := journal.ListQuery{MinImportance: PinImportance, SourceMessages: ids, CitingFrom: slices.Min(ids)}
	es, err := c.journal.List(ctx, p.NPC, lq)
	if err != nil {
		return nil, err
	}
	return pinnedLines(es), nil
}

// Compact plans, summarizes and commits a compaction of NPC ch now. The
// caller holds the NPC's lock. It returns the compaction, nil when nothing
// can be compacted (after masking the outputs of a single huge turn, if
// that helps), and the NPC as it left it (ch itself when nothing changed).
func (c *Compactor) Compact(ctx context.Context, ch *character.Character, trigger, instruction string) (*Record, *character.Character, error) {
	start := c.clock.Now()
	p, err := c.Plan(ctx, ch, trigger, instruction)
	if err != nil {
		return nil, nil, err
	}
	return c.compact(ctx, ch, p, start)
}

// CompactLive is Compact for a caller that holds ch's live history as ch's
// history revision has it (character.State.HistoryRev): the plan is made
// of live, which is only read, instead of a history read again. When the
// stored history is no longer at that revision, the caller's copy is
// ignored and it runs as Compact.
func (c *Compactor) CompactLive(ctx context.Context, ch *character.Character, live []character.Message, trigger, instruction string) (*Record, *character.Character, error) {
	start := c.clock.Now()
	rev, err := c.chars.HistoryRev(ctx, ch.ID)
	if err != nil {
		return nil, nil, err
	}
	if rev != ch.State.HistoryRev {
		return c.Compact(ctx, ch, trigger, instruction)
	}
	return c.compact(ctx, ch, NewPlan(ch, live, trigger, instruction), start)
}

// compact summarizes and commits plan p of ch, begun at start.
func (c *Compactor) compact(ctx context.Context, ch *character.Character, p *Plan, start time.Time) (*Record, *character.Character, error) {
	trigger := p.Trigger
	if p.Empty() {
		if len(p.Mask) > 0 {
			m, err := c.chars.MaskMessages(ctx, ch.ID, p.Mask)
			if err != nil {
				return nil, nil, err
			}
			if m.After != nil {
				return nil, m.After, nil
			}
		}
		return nil, ch, nil
	}
	pinned, err := c.Pinned(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	s := c.Summarize(ctx, ch, p, pinned)
	rec, after, err := c.commit(ctx, ch, p, s)
	if err != nil {
		return nil, nil, err
	}
	c.log.Info().Str("npc", ch.ID).Str("trigger", trigger).Int("messages", rec.MessagesCompacted).
		Int("tokens_before", rec.TokensBefore).Int("tokens_after", rec.TokensAfter).Str("summarizer", rec.Summarizer).
		Dur("took", c.clock.Since(start)).Msg("compacted")
	return rec, after, nil
}

// ErrNotFound means there is no such compaction.
var ErrNotFound = errors.New("sleep: not found")

// ErrStale means a plan's rows are no longer all live (another compaction
// or a clear ran since it was made); nothing was changed.
var ErrStale = errors.New("sleep: plan is stale")

// Commit stores a compaction in one transaction: the compaction record, the
// masking of a huge turn's outputs, notable facts of the span journaled
// before they leave the context, the [CONTEXT SUMMARY] message at the head
// of the live history, the span archived (never deleted), a
// context_synthesis journal entry with the summary and its sources, and the
// NPC's compaction count. It fails with ErrStale, changing nothing, if any
// planned row is no longer live. The caller holds the NPC's lock.
func (c *Compactor) Commit(ctx context.Context, ch *character.Character, p *Plan, s Summary) (*Record, error) {
	rec, _, err := c.commit(ctx, ch, p, s)
	return rec, err
}

// CommitState is Commit that also returns the NPC as the compaction left
// it: for a tick that goes on with it.
func (c *Compactor) CommitState(ctx context.Context, ch *character.Character, p *Plan, s Summary) (*Record, *character.Character, error) {
	return c.commit(ctx, ch, p, s)
}

// SleepMark is the sleep mark a compaction run by a sleep sets in its own
// transaction: Latest, the newest message id the sleep looked at, or the
// summary the compaction writes when no other message came after Latest;
// and At, when the sleep ran.
type SleepMark struct {
	Latest int64
	At     time.Time
}

// CommitSleep is Commit for a sleep: ch is the NPC the plan was made of,
// read again inside the transaction (it fails with character.ErrNotFound
// if the NPC was deleted and created again since), and the sleep mark is
// set in the transaction that stores the compaction, so that the two
// commit together. The caller holds the NPC's lock.
func (c *Compactor) CommitSleep(ctx context.Context, ch *character.Character, p *Plan, s Summary, mark SleepMark) (*Record, error) {
	rec, _, err := c.commitWith(ctx, ch, p, s, &mark)
	return rec, err
}

// commit is Commit that also returns the NPC as the compaction left it.
func (c *Compactor) commit(ctx context.Context, ch *character.Character, p *Plan, s Summary) (*Record, *character.Character, error) {
	return c.commitWith(ctx, ch, p, s, nil)
}

// commitWith is commit that, given a mark, also sets the sleep mark; ch is
// then the life the plan was made of, and the NPC as read in the
// transaction stands for it.
func (c *Compactor) commitWith(ctx context.Context, ch *character.Character, p *Plan, s Summary, mark *SleepMark) (*Record, *character.Character, error) {
	if p.Empty() {
		return nil, nil, fmt.Errorf("commit compaction of %q: empty plan", ch.ID)
	}
	var after *character.Character
	now := c.now()
	var rec *Record
	err := c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		cs := c.chars.WithTx(tx)
		js := c.journal.WithTx(tx)
		// The NPC planned stands for its settings while they are
		// unchanged: only its state is read, holding the writer.
		before, err := cs.Fresh(ctx, ch)
		if err != nil {
			return err
		}
		if !before.CreatedAt.Equal(ch.CreatedAt) {
			// Deleted and created again while the summary was written:
			// the plan is of a life that is gone.
			return fmt.Errorf("%w: npc %q was deleted and created again", character.ErrNotFound, ch.ID)
		}
		ch = before
		counter := c.models.Counter(ch.Model)
		span := p.SpanIDs()
		rec = &Record{CharacterID: ch.ID, Trigger: p.Trigger, Summarizer: s.Summarizer, FallbackReason: s.FallbackReason,
			Instruction: p.Instruction, MessagesCompacted: len(span), Tick: ch.State.Tick, GameTime: ch.State.GameTime, CreatedAt: now}
		rec.FirstMessageID, rec.LastMessageID = p.Span[0].ID, p.Span[len(p.Span)-1].ID
		rec.TokensBefore = before.ContextTokens()
		if err := c.writeRecord(ctx, tx, rec); err != nil {
			return fmt.Errorf("record compaction: %w", err)
		}
		// held is the history's revision as this transaction leaves it
		// before the row's last write, for that write to check.
		var masked []int64
		held := before.State.HistoryRev
		if len(p.Mask) > 0 {
			m, err := cs.MaskMessages(ctx, ch.ID, p.Mask)
			if err != nil {
				return err
			}
			rec.Masked, masked = len(m.IDs), m.IDs
			if m.After != nil {
				held = m.After.State.HistoryRev
			}
		}
		// The NPC's row is written once, at the end, with what archiving
		// the span and appending the summary change in its totals.
		delta, err := cs.ArchiveMessages(ctx, ch.ID, span, &rec.ID)
		if err != nil {
			if errors.Is(err, character.ErrInvalid) {
				return fmt.Errorf("%w: %v", ErrStale, err)
			}
			return err
		}
		// The notable facts of the span and the synthesis go in one insert
		// at the end, in this order, as they are numbered.
		entries := notableBeforeCompaction(p.Span)
		sources := spanSources(p.Span)
		body := character.SummaryPrefix + "\n" + s.Text
		sum := &character.Message{Role: llm.RoleSystem, Summary: true, Content: body, Turn: ch.State.Turn, Tick: ch.State.Tick,
			GameTime: ch.State.GameTime, CreatedAt: now}
		sum.Metadata.V = map[string]any{
			"compacted_count":         len(span),
			"compacted_at":            now.Format(time.RFC3339),
			"original_token_count":    p.SpanTokens + prevTokens(p),
			"first_source_message_id": rec.FirstMessageID,
			"last_source_message_id":  rec.LastMessageID,
			"compaction_id":           rec.ID,
			"trigger":                 p.Trigger,
			"summarizer":              s.Summarizer,
			"rewrite":                 ch.State.Compactions + 1,
		}
		// Measured as InsertMessages measures it, so that the summary is
		// written with its count in its metadata.
		character.Measure(sum, counter, 0)
		sum.Metadata.V["summary_token_count"] = sum.Tokens
		added, err := cs.InsertMessages(ctx, ch.ID, []*character.Message{sum}, counter, 0)
		if err != nil {
			return err
		}
		entry := &journal.Entry{Type: journal.TypeContextSynthesis, Content: s.Text, Importance: 6, GameTime: ch.State.GameTime,
			Sources: store.NewJSON(sources),
			Metadata: store.NewJSON(map[string]any{"compaction_id": rec.ID, "trigger": p.Trigger, "summarizer": s.Summarizer,
				"summary_message_id": sum.ID, "first_message_id": rec.FirstMessageID, "last_message_id": rec.LastMessageID})}
		if err := js.Add(ctx, ch.ID, append(entries, entry)...); err != nil {
			return err
		}
		cols, next := delta.Add(added).ColumnsFrom(held)
		cols["compactions"] = gorm.Expr("compactions + 1")
		if mark != nil {
			at, err := markPast(ctx, cs, ch.ID, mark.Latest, sum.ID)
			if err != nil {
				return err
			}
			cols["sleep_mark"], cols["last_sleep_at"] = at, mark.At
		}
		// The state as this write leaves it: only state columns changed
		// in this transaction, so the rest of the NPC is as read above.
		state, err := cs.UpdateStateReturning(ctx, ch.ID, cols)
		if err != nil {
			return err
		}
		after = new(character.Character)
		*after = *before
		after.State = state
		if state.HistoryRev == next {
			// No other write came between this transaction's own (another
			// process's, where the database lets one in: the NPC's lease
			// keeps other daemons from writing its history meanwhile).
			rec.Live = &LiveChange{Prior: before.State.HistoryRev, Masked: masked, Archived: span, Summary: *sum}
		}
		rec.TokensAfter = after.ContextTokens()
		if note := missedTarget(after, p); note != after.State.CompactionNote {
			if err := cs.UpdateState(ctx, ch.ID, map[string]any{"compaction_note": note}); err != nil {
				return err
			}
			after.State.CompactionNote = note
		}
		rec.Metadata = store.NewJSON(map[string]any{"target_tokens": TargetTokens(after)})
		if note := after.State.CompactionNote; note != "" {
			rec.Metadata.V["target_missed"] = note
		}
		rec.SummaryMessageID = sum.ID
		rec.JournalID = entry.ID
		rec.DurationMS = c.clock.Since(now).Milliseconds()
		return c.finishRecord(ctx, tx, rec)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("commit compaction of %q: %w", ch.ID, err)
	}
	return rec, after, nil
}

// missedTarget says why the context a compaction left (after) is over its
// target, or returns "" when it is not.
func missedTarget(after *character.Character, p *Plan) string {
	target := TargetTokens(after)
	got := after.ContextTokens()
	if got <= target {
		return ""
	}
	fixed := after.State.SystemTokens + after.State.ToolTokens
	why := ""
	switch {
	case fixed+max(after.State.SummaryTokens, SummaryBudgetFor(after)) >= target:
		// The summary gives way to the newest turn down to a floor, so
		// the fixed part is to blame once it leaves less than a summary's
		// usual budget under the target.
		why = fmt.Sprintf("persona, instructions and tools (%d tokens) with a summary (%d) alone exceed it; shorten the persona or the tools, or raise compaction.target",
			fixed, max(after.State.SummaryTokens, SummaryBudgetFor(after)))
	case p.Unread > 0 && got-p.Unread <= target:
		why = fmt.Sprintf("the newest tool results, which the model has not read yet, take %d tokens more than their placeholders; they are kept whole until it has", p.Unread)
	case keptOneTurn(p):
		why = fmt.Sprintf("the newest turn alone takes %d tokens and a turn is never split", after.State.LiveTokens)
	default:
		why = fmt.Sprintf("the summary took %d tokens and the recent history kept %d", after.State.SummaryTokens, after.State.LiveTokens)
	}
	return fmt.Sprintf("the last compaction left the context at %d tokens, "+OverTarget+" of %d: %s", got, target, why)
}

// OverTarget is the words by which an NPC's warning tells that its last
// compaction could not bring the context down to its target.
const OverTarget = "over its target"

// keptOneTurn reports whether a plan kept only the newest turn.
func keptOneTurn(p *Plan) bool {
	for i := range p.Keep {
		if i > 0 && p.Keep[i].Role == llm.RoleUser {
			return false
		}
	}
	return true
}

func prevTokens(p *Plan) int {
	if p.Previous == nil {
		return 0
	}
	return p.Previous.PromptTokens()
}

// spanSources cites every compacted message and the game events behind them.
func spanSources(span []character.Message) character.Sources {
	var s character.Sources
	seen := map[string]bool{}
	for _, m := range span {
		s.MessageIDs = append(s.MessageIDs, m.ID)
		for _, r := range m.EventRefs.V {
			if !seen[r] {
				seen[r] = true
				s.EventRefs = append(s.EventRefs, r)
			}
		}
	}
	return s
}

// notableBeforeCompaction journals what the span holds that the tick did
// not already journal and that a poor summary could lose: notable
// observations returned by game tools. (Notable perceptions and the NPC's
// own notable words were journaled by the tick that made them.)
func notableBeforeCompaction(span []character.Message) []*journal.Entry {
	var out []*journal.Entry
	for _, m := range span {
		if m.Role != llm.RoleTool || m.ToolName == "" || isInternalResult(m.ToolName) || m.Content == "ok" {
			continue
		}
		if imp := journal.Importance("observation", m.Content); imp >= 7 {
			out = append(out, extracted(journal.TypeObservation, m.ToolName+" showed: "+text.Clip(text.OneLine(m.Content), 1000), imp, m))
		}
	}
	return out
}

func extracted(typ, content string, imp int, m character.Message) *journal.Entry {
	e := &journal.Entry{Type: typ, Content: content, Importance: imp, GameTime: m.GameTime,
		Metadata: store.NewJSON(map[string]any{"extracted_before_compaction": true})}
	e.Sources.V = character.Sources{MessageIDs: []int64{m.ID}, EventRefs: m.EventRefs.V}
	return e
}

func isInternalResult(tool string) bool {
	switch tool {
	case "journal_write", "profile_update", "memory_search", "recall_archive":
		return true
	}
	return false
}

// DeleteNPC removes an NPC's compaction records inside tx.
func (c *Compactor) DeleteNPC(ctx context.Context, tx *gorm.DB, id string) error {
	if err := tx.WithContext(ctx).Where("character_id = ?", id).Delete(&Record{}).Error; err != nil {
		return fmt.Errorf("delete compactions of %q: %w", id, err)
	}
	return nil
}

// Records lists an NPC's compactions, oldest first.
func (c *Compactor) Records(ctx context.Context, id string) ([]Record, error) {
	var rs []Record
	if err := c.db.WithContext(ctx).Where("character_id = ?", id).Order("id").Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("compactions of %q: %w", id, err)
	}
	return rs, nil
}

// Record returns one compaction of an NPC.
func (c *Compactor) Record(ctx context.Context, id string, recID int64) (*Record, error) {
	var r Record
	err := c.db.WithContext(ctx).Where("character_id = ? AND id = ?", id, recID).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("%w: compaction %d of npc %q", ErrNotFound, recID, id)
	}
	if err != nil {
		return nil, fmt.Errorf("compaction %d of %q: %w", recID, id, err)
	}
	return &r, nil
}

// recordColumns are the columns a new compaction record is written with,
// as gorm writes a Record (every stored field but the id), in that order
// (recordArgs).
var recordColumns = []string{"character_id", "trigger", "tokens_before", "tokens_after", "messages_compacted", "summarizer",
	"fallback_reason", "instruction", "summary_message_id", "journal_id", "first_message_id", "last_message_id", "masked", "tick",
	"game_time", "created_at", "duration_ms", "metadata"}

func recordArgs(r *Record) []any {
	return []any{r.CharacterID, r.Trigger, r.TokensBefore, r.TokensAfter, r.MessagesCompacted, r.Summarizer,
		r.FallbackReason, r.Instruction, r.SummaryMessageID, r.JournalID, r.FirstMessageID, r.LastMessageID, r.Masked, r.Tick,
		r.GameTime, r.CreatedAt, r.DurationMS, r.Metadata}
}

// finishColumns are the columns the end of a compaction's commit writes
// into its record (finishRecord), in the order of finishArgs.
var finishColumns = []string{"tokens_before", "tokens_after", "summary_message_id", "journal_id", "masked", "duration_ms", "metadata"}

func finishArgs(r *Record) []any {
	return []any{r.TokensBefore, r.TokensAfter, r.SummaryMessageID, r.JournalID, r.Masked, r.DurationMS, r.Metadata}
}

// insertRecordSQL writes a compaction record (SQLite) and returns its id;
// finishRecordSQL writes its finishColumns.
var (
	insertRecordSQL = store.InsertSQL("compactions", recordColumns, 1, "RETURNING `id`")
	finishRecordSQL = "UPDATE `compactions` SET `" + strings.Join(finishColumns, "`=?,`") + "`=? WHERE `id` = ?"
)

// writeRecord stores r inside tx, setting its id: through a prepared
// statement inside an SQLite transaction, else by gorm.
func (c *Compactor) writeRecord(ctx context.Context, tx *gorm.DB, r *Record) error {
	if st, ok := c.prep.Stmt(ctx, tx, insertRecordSQL); ok {
		return st.QueryRowContext(ctx, recordArgs(r)...).Scan(&r.ID)
	}
	return tx.Create(r).Error
}

// finishRecord writes the fields of r that its commit sets last (sizes,
// summary, journal entry, masked rows, duration, metadata) inside tx.
func (c *Compactor) finishRecord(ctx context.Context, tx *gorm.DB, r *Record) error {
	args := finishArgs(r)
	if st, ok := c.prep.Stmt(ctx, tx, finishRecordSQL); ok {
		_, err := st.ExecContext(ctx, append(args, r.ID)...)
		return err
	}
	set := make(map[string]any, len(finishColumns))
	for i, col := range finishColumns {
		set[col] = args[i]
	}
	return tx.Model(r).Updates(set).Error
}
