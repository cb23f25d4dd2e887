package inspect

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
)

// Inspector reads what an NPC knows. It never writes, so the database it is
// given may be opened read-only. It is safe for concurrent use.
type Inspector struct {
	chars       *character.Store
	journal     *journal.Store
	compactions *sleep.Records
}

// New returns an Inspector over db, whose schema holds the migrations of
// packages character, journal and sleep.
func New(db *gorm.DB) *Inspector {
	return &Inspector{chars: character.NewStore(db), journal: journal.NewStore(db), compactions: sleep.NewRecords(db)}
}

// Overview is what the overview view adds to an NPC's context budget: how
// often and why its history was compacted, the summary it carries now, and
// how much it remembers beyond its context.
type Overview struct {
	// CompactionsByTrigger counts compaction records by trigger.
	CompactionsByTrigger map[string]int `json:"compactions_by_trigger"`
	// LastCompaction is the newest compaction, or nil.
	LastCompaction *sleep.Record `json:"last_compaction"`
	// Summary is the live [CONTEXT SUMMARY] message, or nil.
	Summary *character.Message `json:"-"`
	// JournalByType counts journal entries by type.
	JournalByType map[string]int `json:"journal_by_type"`
	// Unconsolidated counts entries the next sleep will consolidate.
	Unconsolidated     int `json:"unconsolidated"`
	Memories           int `json:"memories"`
	SupersededMemories int `json:"superseded_memories"`
	Profiles           int `json:"profiles"`
	Facts              int `json:"facts"`
	SupersededFacts    int `json:"superseded_facts"`
	PendingEvents      int `json:"pending_events"`
	// LastTickAt is when the newest recorded tick ran (wall clock), or nil.
	LastTickAt *time.Time `json:"last_tick_at"`
}

// Overview gathers the overview of NPC npc; character.ErrNotFound when it
// does not exist.
func (in *Inspector) Overview(ctx context.Context, npc string) (*Overview, error) {
	if _, err := in.chars.Get(ctx, npc); err != nil {
		return nil, err
	}
	o := &Overview{}
	var err error
	if o.CompactionsByTrigger, err = in.compactions.CountByTrigger(ctx, npc); err != nil {
		return nil, err
	}
	if o.LastCompaction, err = in.compactions.Last(ctx, npc); err != nil {
		return nil, err
	}
	if o.Summary, err = in.chars.LiveSummary(ctx, npc); err != nil {
		return nil, err
	}
	if o.JournalByType, err = in.journal.CountByType(ctx, npc); err != nil {
		return nil, err
	}
	if o.Unconsolidated, err = in.journal.CountUnconsolidated(ctx, npc); err != nil {
		return nil, err
	}
	if o.Memories, o.SupersededMemories, err = in.journal.CountMemories(ctx, npc); err != nil {
		return nil, err
	}
	if o.Profiles, o.Facts, o.SupersededFacts, err = in.chars.BeliefCounts(ctx, npc); err != nil {
		return nil, err
	}
	if o.PendingEvents, err = in.chars.PendingCount(ctx, npc); err != nil {
		return nil, err
	}
	last, err := in.chars.LastTickRecord(ctx, npc)
	if err != nil {
		return nil, err
	}
	if last != nil {
		at := last.At
		o.LastTickAt = &at
	}
	return o, nil
}

// Message returns one message of NPC npc, live or archived, with the
// compaction that archived it (nil when it is live or was archived by a
// clear).
func (in *Inspector) Message(ctx context.Context, npc string, id int64) (*character.Message, *sleep.Record, error) {
	if _, err := in.chars.Get(ctx, npc); err != nil {
		return nil, nil, err
	}
	m, err := in.chars.MessageByID(ctx, npc, id)
	if errors.Is(err, character.ErrNotFound) {
		return nil, nil, notFound(npc, "message %d", id)
	}
	if err != nil {
		return nil, nil, err
	}
	if m.CompactionID == nil {
		return m, nil, nil
	}
	rec, err := in.Compaction(ctx, npc, *m.CompactionID)
	if errors.Is(err, ErrNotFound) {
		return m, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return m, rec, nil
}

// Entry returns one journal entry of NPC npc.
func (in *Inspector) Entry(ctx context.Context, npc string, id int64) (*journal.Entry, error) {
	if _, err := in.chars.Get(ctx, npc); err != nil {
		return nil, err
	}
	e, err := in.journal.Get(ctx, npc, id)
	if errors.Is(err, journal.ErrNotFound) {
		return nil, notFound(npc, "journal entry %d", id)
	}
	return e, err
}

// Memory returns one memory of NPC npc, current or superseded.
func (in *Inspector) Memory(ctx context.Context, npc string, id int64) (*journal.Memory, error) {
	if _, err := in.chars.Get(ctx, npc); err != nil {
		return nil, err
	}
	m, err := in.journal.Memory(ctx, npc, id)
	if errors.Is(err, journal.ErrNotFound) {
		return nil, notFound(npc, "memory %d", id)
	}
	return m, err
}

// Compaction returns one compaction record of NPC npc.
func (in *Inspector) Compaction(ctx context.Context, npc string, id int64) (*sleep.Record, error) {
	rec, err := in.compactions.Find(ctx, npc, id)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, notFound(npc, "compaction %d", id)
	}
	return rec, nil
}

// Compactions returns the compaction records of NPC npc with the given ids,
// oldest first; ids that name none are left out.
func (in *Inspector) Compactions(ctx context.Context, npc string, ids []int64) ([]sleep.Record, error) {
	return in.compactions.ByIDs(ctx, npc, ids)
}

// allCompactions returns every compaction record of NPC npc by id.
func (in *Inspector) allCompactions(ctx context.Context, npc string) (map[int64]*sleep.Record, []sleep.Record, error) {
	rs, err := in.compactions.All(ctx, npc)
	if err != nil {
		return nil, nil, err
	}
	by := make(map[int64]*sleep.Record, len(rs))
	for i := range rs {
		by[rs[i].ID] = &rs[i]
	}
	return by, rs, nil
}
