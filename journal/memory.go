package journal

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

// MaxMemoryBytes bounds a memory's content; longer text is cut.
const MaxMemoryBytes = 4 << 10

// Memory is a long-term fact an NPC holds, made by consolidation from
// journal entries (or written directly by a game). A memory's content never
// changes: a revised fact is a new memory that supersedes the old one, which
// is kept with SupersededAt and SupersededBy set, so the NPC can still say
// what it believed before.
type Memory struct {
	ID          int64  `gorm:"primaryKey;autoIncrement" json:"id"`
	CharacterID string `gorm:"size:64;not null;index:idx_memories_char_rev,priority:1;index:idx_memories_char_hash,priority:1;index:idx_memories_char_slot,priority:1" json:"-"`
	Content     string `gorm:"not null" json:"content"`
	// Entity is who or what the memory is about (a profile key), if anyone.
	Entity string `gorm:"size:128;index:idx_memories_char_slot,priority:2" json:"entity,omitempty"`
	// Key names the slot the memory fills for its entity ("sword", "home"):
	// adding a memory with the same entity and key supersedes the current one.
	Key        string `gorm:"size:64;index:idx_memories_char_slot,priority:3" json:"key,omitempty"`
	Importance int    `json:"importance"`
	// Embedding is the content's vector as little-endian float32 bytes,
	// made by EmbedModel. It is filled lazily by the Retriever when empty or
	// made by another model.
	Embedding  []byte `json:"-"`
	EmbedModel string `gorm:"size:128" json:"embed_model,omitempty"`
	// ContentHash is ContentHash(Content), to find exact duplicates.
	ContentHash  string                        `gorm:"size:64;index:idx_memories_char_hash,priority:2" json:"content_hash"`
	Sources      store.JSON[character.Sources] `gorm:"type:text" json:"sources"`
	ValidFrom    time.Time                     `json:"valid_from"`
	SupersededAt *time.Time                    `json:"superseded_at"`
	SupersededBy *int64                        `json:"superseded_by,omitempty"`
	LastAccessed *time.Time                    `json:"last_accessed"`
	AccessCount  int                           `json:"access_count"`
	// GameTime is when what the memory records happened, on the game's clock.
	GameTime time.Time `json:"game_time"`
	// Rev is the NPC's memory revision that last changed the row; the
	// retriever's cache reloads rows newer than the revision it holds.
	Rev       int64     `gorm:"not null;default:0;index:idx_memories_char_rev,priority:2" json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// TableName names the table: memories.
func (Memory) TableName() string { return "memories" }

// Current reports whether the memory has not been superseded.
func (m *Memory) Current() bool { return m.SupersededAt == nil }

// memoryRev counts changes to an NPC's memories. Every write to memories
// bumps it in the same transaction; the increment locks the row, so the
// revisions of one NPC commit in order on PostgreSQL as on SQLite.
type memoryRev struct {
	CharacterID string `gorm:"primaryKey;size:64"`
	Rev         int64  `gorm:"not null"`
}

func (memoryRev) TableName() string { return "memory_revs" }

// cachedEmbedding is one vector of the embedding cache: the same text is
// embedded once per model, whichever rows hold it.
type cachedEmbedding struct {
	Model     string `gorm:"primaryKey;size:128"`
	Hash      string `gorm:"primaryKey;size:64"`
	Dims      int    `gorm:"not null"`
	Vector    []byte `gorm:"not null"`
	CreatedAt time.Time
}

func (cachedEmbedding) TableName() string { return "embeddings" }

// bumpRev increments NPC npc's memory revision inside tx and returns it.
func bumpRev(tx *gorm.DB, npc string) (int64, error) {
	var rev int64
	err := tx.Raw(`INSERT INTO memory_revs (character_id, rev) VALUES (?, 1)
		ON CONFLICT (character_id) DO UPDATE SET rev = memory_revs.rev + 1 RETURNING rev`, npc).Scan(&rev).Error
	if err != nil {
		return 0, fmt.Errorf("bump memory revision: %w", err)
	}
	return rev, nil
}

// prepareMemory validates m and fills its derived fields for NPC npc.
func prepareMemory(npc string, m *Memory, now time.Time) error {
	m.Content = strings.TrimSpace(cut(m.Content, MaxMemoryBytes))
	if m.Content == "" {
		return fmt.Errorf("%w: memory content is empty", ErrInvalid)
	}
	m.ID = 0
	m.CharacterID = npc
	m.Entity = strings.TrimSpace(cut(m.Entity, 128))
	m.Key = strings.TrimSpace(cut(m.Key, 64))
	if m.Importance == 0 {
		m.Importance = Importance("", m.Content)
	}
	m.Importance = max(1, min(10, m.Importance))
	m.ContentHash = ContentHash(m.Content)
	if len(m.Embedding) == 0 || m.EmbedModel == "" {
		m.Embedding, m.EmbedModel = nil, ""
	}
	if len(m.Embedding)%4 != 0 {
		return fmt.Errorf("%w: memory embedding of %d bytes", ErrInvalid, len(m.Embedding))
	}
	m.SupersededAt, m.SupersededBy = nil, nil
	m.LastAccessed, m.AccessCount = nil, 0
	m.CreatedAt, m.UpdatedAt = now, now
	if m.GameTime.IsZero() {
		m.GameTime = now
	}
	m.GameTime = m.GameTime.UTC()
	if m.ValidFrom.IsZero() {
		m.ValidFrom = m.GameTime
	}
	m.ValidFrom = m.ValidFrom.UTC()
	return nil
}

// groundMemory resolves the relative dates of a prepared memory against its
// game time.
func (s *Store) groundMemory(m *Memory) {
	m.Content = strings.TrimSpace(cut(s.Ground(m.Content, m.GameTime), MaxMemoryBytes))
	m.ContentHash = ContentHash(m.Content)
}

// AddMemory stores m as a new current memory of NPC npc and sets its ID.
// Content is trimmed and cut to MaxMemoryBytes (empty content is
// ErrInvalid); Importance 0 is scored with Importance, others clamped to
// 1–10; GameTime defaults to now and ValidFrom to GameTime. An Embedding
// may come with its EmbedModel; without one the Retriever embeds the memory
// when it next searches the NPC. When m has a Key, the current memory of the
// same Entity and Key (if any) is superseded by m; the ids it supersedes are
// returned.
func (s *Store) AddMemory(ctx context.Context, npc string, m *Memory) (superseded []int64, err error) {
	sup, err := s.AddMemories(ctx, npc, m)
	if err != nil {
		return nil, err
	}
	return sup[0], nil
}

// AddMemories stores ms as new current memories of NPC npc, in order, as
// AddMemory would one after the other (a later memory of a slot supersedes
// an earlier one of the same call), and returns for each the ids it
// superseded. They are written with one revision and a few statements
// whatever their number: one insert per 100 memories, one read of the slots
// they fill and one update per memory that supersedes some. When any is
// invalid, none is stored.
func (s *Store) AddMemories(ctx context.Context, npc string, ms ...*Memory) (superseded [][]int64, err error) {
	return s.addMemories(ctx, npc, false, ms)
}

// AddGroundedMemories is AddMemories for memories whose Content is grounded
// already, by Ground at their GameTime (which must be set): it is stored
// without being grounded again.
func (s *Store) AddGroundedMemories(ctx context.Context, npc string, ms ...*Memory) (superseded [][]int64, err error) {
	for _, m := range ms {
		if m.GameTime.IsZero() {
			return nil, fmt.Errorf("%w: a grounded memory without its game time", ErrInvalid)
		}
	}
	return s.addMemories(ctx, npc, true, ms)
}

func (s *Store) addMemories(ctx context.Context, npc string, grounded bool, ms []*Memory) (superseded [][]int64, err error) {
	if len(ms) == 0 {
		return nil, nil
	}
	now := time.Now().UTC()
	for _, m := range ms {
		if err := prepareMemory(npc, m, now); err != nil {
			return nil, err
		}
		if !grounded {
			s.groundMemory(m)
		}
	}
	err = s.atomically(ctx, func(tx *gorm.DB) error {
		superseded = make([][]int64, len(ms))
		rev, err := bumpRev(tx, npc)
		if err != nil {
			return err
		}
		for _, m := range ms {
			m.Rev = rev
		}
		if err := tx.CreateInBatches(ms, 100).Error; err != nil {
			return err
		}
		// The current memories of the slots the new ones fill, oldest
		// first; each new memory supersedes what is current in its slot
		// when it comes, earlier new ones included.
		type slot struct{ entity, key string }
		var keys []string
		added := make([]int64, 0, len(ms))
		for _, m := range ms {
			added = append(added, m.ID)
			if m.Key != "" {
				keys = append(keys, m.Key)
			}
		}
		if len(keys) == 0 {
			return nil
		}
		var rows []Memory
		if err := tx.Model(&Memory{}).Select("id, entity, "+quoteKey(tx)).
			Where("character_id = ? AND "+quoteKey(tx)+" IN ? AND id NOT IN ? AND superseded_at IS NULL", npc, keys, added).
			Order("id").Find(&rows).Error; err != nil {
			return err
		}
		current := map[slot][]int64{}
		for _, r := range rows {
			k := slot{r.Entity, r.Key}
			current[k] = append(current[k], r.ID)
		}
		for i, m := range ms {
			if m.Key == "" {
				continue
			}
			k := slot{m.Entity, m.Key}
			superseded[i] = current[k]
			current[k] = []int64{m.ID}
			if err := markSuperseded(tx, npc, superseded[i], m.ID, m.ValidFrom, rev, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("add memory for %q: %w", npc, err)
	}
	return superseded, nil
}

// Supersede stores m as the replacement of memory oldID of NPC npc: m is
// added as by AddMemory (and, with a Key, supersedes its slot too) and the
// old memory is kept, marked superseded by m at m's ValidFrom. Superseding
// a memory that does not exist is ErrNotFound; one already superseded is
// ErrInvalid, since its replacement is the memory to revise.
func (s *Store) Supersede(ctx context.Context, npc string, oldID int64, m *Memory) error {
	now := time.Now().UTC()
	if err := prepareMemory(npc, m, now); err != nil {
		return err
	}
	s.groundMemory(m)
	err := s.atomically(ctx, func(tx *gorm.DB) error {
		var old Memory
		err := tx.Select("id, superseded_at, entity, "+quoteKey(tx)).Where("character_id = ? AND id = ?", npc, oldID).Take(&old).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("%w: memory %d of npc %q", ErrNotFound, oldID, npc)
		}
		if err != nil {
			return err
		}
		if !old.Current() {
			return fmt.Errorf("%w: memory %d is already superseded", ErrInvalid, oldID)
		}
		rev, err := bumpRev(tx, npc)
		if err != nil {
			return err
		}
		m.Rev = rev
		if err := tx.Create(m).Error; err != nil {
			return err
		}
		ids := []int64{oldID}
		if m.Key != "" {
			var slot []int64
			if err := tx.Model(&Memory{}).
				Where("character_id = ? AND entity = ? AND "+quoteKey(tx)+" = ? AND id NOT IN ? AND superseded_at IS NULL", npc, m.Entity, m.Key, []int64{m.ID, oldID}).
				Pluck("id", &slot).Error; err != nil {
				return err
			}
			ids = append(ids, slot...)
		}
		return markSuperseded(tx, npc, ids, m.ID, m.ValidFrom, rev, now)
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) {
			return err
		}
		return fmt.Errorf("supersede memory %d of %q: %w", oldID, npc, err)
	}
	return nil
}

func markSuperseded(tx *gorm.DB, npc string, ids []int64, by int64, at time.Time, rev int64, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	return tx.Model(&Memory{}).Where("character_id = ? AND id IN ?", npc, ids).
		UpdateColumns(map[string]any{"superseded_at": at, "superseded_by": by, "rev": rev, "updated_at": now}).Error
}

// quoteKey quotes the column "key", a keyword in SQL.
func quoteKey(tx *gorm.DB) string {
	return tx.Statement.Quote("key")
}

// MemoryQuery selects memories.
type MemoryQuery struct {
	Entity string // only memories about this entity; "" for all
	Key    string // only this slot; "" for all
	// Superseded also returns superseded memories.
	Superseded bool
	Before     int64 // only ids below; 0 for no bound
	Limit      int   // newest Limit memories; 0 for all
}

// Memories returns memories of NPC npc oldest first, current ones only
// unless mq.Superseded.
func (s *Store) Memories(ctx context.Context, npc string, mq MemoryQuery) ([]Memory, error) {
	q := s.q(ctx).Where("character_id = ?", npc)
	if mq.Entity != "" {
		q = q.Where("entity = ?", mq.Entity)
	}
	if mq.Key != "" {
		q = q.Where(quoteKey(q)+" = ?", mq.Key)
	}
	if !mq.Superseded {
		q = q.Where("superseded_at IS NULL")
	}
	if mq.Before > 0 {
		q = q.Where("id < ?", mq.Before)
	}
	if mq.Limit > 0 {
		q = q.Order("id DESC").Limit(mq.Limit)
	} else {
		q = q.Order("id")
	}
	var ms []Memory
	if err := q.Find(&ms).Error; err != nil {
		return nil, fmt.Errorf("memories of %q: %w", npc, err)
	}
	if mq.Limit > 0 {
		for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
			ms[i], ms[j] = ms[j], ms[i]
		}
	}
	return ms, nil
}

// Memory returns one memory of NPC npc, current or superseded.
func (s *Store) Memory(ctx context.Context, npc string, id int64) (*Memory, error) {
	var m Memory
	err := s.q(ctx).Where("character_id = ? AND id = ?", npc, id).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("%w: memory %d of npc %q", ErrNotFound, id, npc)
	}
	if err != nil {
		return nil, fmt.Errorf("memory %d of %q: %w", id, npc, err)
	}
	return &m, nil
}

// MemoriesByHash returns the current memories of NPC npc whose content is
// the same as content once case, punctuation and spacing are ignored: the
// exact duplicates consolidation skips instead of adding.
func (s *Store) MemoriesByHash(ctx context.Context, npc, content string) ([]Memory, error) {
	var ms []Memory
	err := s.q(ctx).Where("character_id = ? AND content_hash = ? AND superseded_at IS NULL", npc, ContentHash(content)).
		Order("id").Find(&ms).Error
	if err != nil {
		return nil, fmt.Errorf("memories of %q by hash: %w", npc, err)
	}
	return ms, nil
}

// MemoriesByHashes is MemoriesByHash for many contents at once: the
// current memories of NPC npc whose content hash is one of the contents',
// by hash, oldest first. One query per 500 contents.
func (s *Store) MemoriesByHashes(ctx context.Context, npc string, contents []string) (map[string][]Memory, error) {
	hashes := make([]string, 0, len(contents))
	seen := map[string]bool{}
	for _, c := range contents {
		if h := ContentHash(c); !seen[h] {
			seen[h] = true
			hashes = append(hashes, h)
		}
	}
	out := map[string][]Memory{}
	for len(hashes) > 0 {
		n := min(len(hashes), 500)
		var ms []Memory
		err := s.q(ctx).Where("character_id = ? AND content_hash IN ? AND superseded_at IS NULL", npc, hashes[:n]).Order("id").Find(&ms).Error
		if err != nil {
			return nil, fmt.Errorf("memories of %q by hash: %w", npc, err)
		}
		for _, m := range ms {
			out[m.ContentHash] = append(out[m.ContentHash], m)
		}
		hashes = hashes[n:]
	}
	return out, nil
}

// accessFlushCount and accessFlushEvery say when recorded accesses are
// written: whichever comes first.
const (
	accessFlushCount = 512
	accessFlushEvery = 10 * time.Second
)

// accessLog gathers the recalls of memories between writes. Writing
// access_count and last_accessed on every search would make every read a
// write (and rewrite a memory row, embedding included, per result); like a
// file system's relatime, npcd writes them in batches instead. A crash
// loses at most one batch of what is advisory data.
type accessLog struct {
	mu      sync.Mutex
	pending map[int64]access
	flushed time.Time
}

type access struct {
	n    int
	last time.Time
}

func (a *accessLog) record(id int64, at time.Time) {
	a.restore(map[int64]access{id: {n: 1, last: at}})
}

// restore adds recalls back, after a write failed.
func (a *accessLog) restore(recalls map[int64]access) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		a.pending = map[int64]access{}
	}
	for id, r := range recalls {
		p := a.pending[id]
		p.n += r.n
		if r.last.After(p.last) {
			p.last = r.last
		}
		a.pending[id] = p
	}
}

// due reports whether a batch should be written now.
func (a *accessLog) due(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.flushed.IsZero() {
		a.flushed = now
	}
	return len(a.pending) >= accessFlushCount || (len(a.pending) > 0 && now.Sub(a.flushed) >= accessFlushEvery)
}

// take empties the log and returns what it held.
func (a *accessLog) take() map[int64]access {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.pending
	a.pending = nil
	a.flushed = time.Now()
	return p
}

// addAccess writes recalls of memories: access_count goes up by the number
// of recalls and last_accessed becomes the latest. It does not change the
// revision, so the retriever's cache is not reloaded for it.
func (s *Store) addAccess(ctx context.Context, recalls map[int64]access) error {
	if len(recalls) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(recalls))
	for id := range recalls {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return s.q(ctx).Transaction(func(tx *gorm.DB) error {
		for _, id := range ids {
			a := recalls[id]
			err := tx.Model(&Memory{}).Where("id = ?", id).UpdateColumns(map[string]any{
				"access_count":  gorm.Expr("access_count + ?", a.n),
				"last_accessed": gorm.Expr("CASE WHEN last_accessed IS NULL OR last_accessed < ? THEN ? ELSE last_accessed END", a.last.UTC(), a.last.UTC()),
			}).Error
			if err != nil {
				return fmt.Errorf("record memory access: %w", err)
			}
		}
		return nil
	})
}

// setMemoryEmbeddings stores vectors made by model on memories, without
// changing their revision (the cache that asked already holds them).
func (s *Store) setMemoryEmbeddings(ctx context.Context, ids []int64, vecs [][]float32, model string) error {
	return s.q(ctx).Transaction(func(tx *gorm.DB) error {
		for i, id := range ids {
			if err := tx.Model(&Memory{}).Where("id = ?", id).
				UpdateColumns(map[string]any{"embedding": EncodeVector(vecs[i]), "embed_model": model}).Error; err != nil {
				return err
			}
		}
		return nil
	})
}

// cachedVectors returns the cached vectors of model for the given text
// hashes, keyed by hash.
func (s *Store) cachedVectors(ctx context.Context, model string, hashes []string) (map[string][]float32, error) {
	out := make(map[string][]float32, len(hashes))
	for start := 0; start < len(hashes); start += 500 {
		end := min(start+500, len(hashes))
		var rows []cachedEmbedding
		if err := s.q(ctx).Where("model = ? AND hash IN ?", model, hashes[start:end]).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("embedding cache: %w", err)
		}
		for _, r := range rows {
			v, err := DecodeVector(r.Vector)
			if err != nil {
				continue // a damaged row is embedded again and overwritten
			}
			out[r.Hash] = v
		}
	}
	return out, nil
}

// cacheVectors stores vectors of model by text hash; an existing row is
// replaced.
func (s *Store) cacheVectors(ctx context.Context, model string, hashes []string, vecs [][]float32) error {
	if len(hashes) == 0 {
		return nil
	}
	now := time.Now().UTC()
	rows := make([]cachedEmbedding, len(hashes))
	for i := range hashes {
		rows[i] = cachedEmbedding{Model: model, Hash: hashes[i], Dims: len(vecs[i]), Vector: EncodeVector(vecs[i]), CreatedAt: now}
	}
	err := s.q(ctx).Clauses(clause.OnConflict{UpdateAll: true}).CreateInBatches(rows, 200).Error
	if err != nil {
		return fmt.Errorf("embedding cache: %w", err)
	}
	return nil
}

// CiteMore adds src to the sources of memory id of NPC npc: a fact found
// again in new entries is kept once, citing the entries and events it was
// found in: the first and the latest, at most maxCitations of each kind (a
// fact an NPC hears every day would otherwise cite a list that grows all
// its life, read and written again at each sleep). The content and
// revision do not change (sources are read with results, never ranked on).
// A memory that does not exist is ErrNotFound.
func (s *Store) CiteMore(ctx context.Context, npc string, id int64, src character.Sources) error {
	return s.atomically(ctx, func(tx *gorm.DB) error {
		var m Memory
		err := tx.Select("id, sources").Where("character_id = ? AND id = ?", npc, id).Take(&m).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("%w: memory %d of npc %q", ErrNotFound, id, npc)
		}
		if err != nil {
			return fmt.Errorf("cite more for memory %d of %q: %w", id, npc, err)
		}
		merged := cleanSources(m.Sources.V)
		mergeSources(&merged, src)
		merged.JournalIDs = boundCitations(merged.JournalIDs)
		merged.MessageIDs = boundCitations(merged.MessageIDs)
		merged.EventRefs = boundCitations(merged.EventRefs)
		if err := tx.Model(&Memory{}).Where("id = ?", id).UpdateColumn("sources", store.NewJSON(merged)).Error; err != nil {
			return fmt.Errorf("cite more for memory %d of %q: %w", id, npc, err)
		}
		return nil
	})
}

// maxCitations bounds each kind of source a memory cited again keeps;
// firstCitations of them are the first it cited, where the fact came from.
const (
	maxCitations   = 64
	firstCitations = 16
)

// boundCitations keeps the first firstCitations of cs and the latest ones,
// maxCitations in all, in order.
func boundCitations[T any](cs []T) []T {
	if len(cs) <= maxCitations {
		return cs
	}
	return append(cs[:firstCitations:firstCitations], cs[len(cs)-(maxCitations-firstCitations):]...)
}
