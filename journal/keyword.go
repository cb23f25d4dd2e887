package journal

import (
	"context"
	"fmt"
	"math"

	"github.com/npcd/npcd/character"
)

// Store.Search is BM25 computed in Go over one NPC's own rows: it reads the
// NPC's searchable rows (the rows the Retriever indexes: its memories, its
// journal entries and its messages of searchableRoles, live or archived,
// without summaries), builds an npcIndex of their words for this one call,
// and ranks with the Retriever's keyword scorer (npcIndex.keyword) at
// FTS5's parameters (bm25K1, bm25B, no query expansion). Statistics are
// those of the NPC alone, so neither its ranking nor its cost depends on
// other NPCs, and the database keeps no full-text index: a commit pays for
// none. Both dialects rank alike.
//
// A memory's entity is searched with its content: its words are appended
// to the memory's text, so a memory about Tomas is found by "Tomas"
// whether or not its content names him.

// Search is the keyword-only search of NPC id's memories, journal entries
// and messages, ranked by BM25 over that NPC's rows alone, without
// vectors, recency, importance or neighbours. It needs no embedder and
// keeps no index in memory; a Retriever is what ticks and tools should
// use, since Search reads the NPC's searchable rows at every call.
func (s *Store) Search(ctx context.Context, id, query string, k int) ([]Result, error) {
	terms := Terms(query)
	if len(terms) == 0 || k <= 0 {
		return nil, nil
	}
	k = min(k, MaxK)
	x, err := s.keywordIndex(ctx, id)
	if err != nil {
		return nil, err
	}
	hits := x.keyword(terms, max(2*k, 20), 0, bm25B)
	best := 0.0
	for _, h := range hits {
		best = math.Max(best, h.score)
	}
	cs := make([]candidate, 0, len(hits))
	for _, h := range hits {
		if best <= 0 || h.score <= 0 {
			continue
		}
		cs = append(cs, candidate{kind: h.kind, id: h.id, score: h.score / best, parts: scoreParts{keyword: h.score / best}})
	}
	sortCandidates(cs)
	rs, _, err := s.collect(ctx, id, cs, k, terms, DefaultMaxContentBytes, window{}, nil, nil, true)
	return rs, err
}

// keywordMessagesSQL reads the text of an NPC's searchable messages, as
// newMessagesSQL selects them for the Retriever.
const keywordMessagesSQL = `SELECT id, content FROM messages
	WHERE character_id = ? AND state IN ? AND summary = ? AND content <> '' AND role IN ? ORDER BY id`

// keywordIndex reads the searchable rows of NPC npc and indexes their
// words: their time stamps removed as the Retriever removes them
// (unstamped), a memory's entity searched with its content.
func (s *Store) keywordIndex(ctx context.Context, npc string) (*npcIndex, error) {
	x := newIndex(npc)
	db := s.r(ctx)
	type row struct {
		ID      int64
		Content string
	}
	var ms []struct {
		ID      int64
		Content string
		Entity  string
	}
	if err := db.Model(&Memory{}).Select("id, content, entity").Where("character_id = ?", npc).Order("id").Scan(&ms).Error; err != nil {
		return nil, fmt.Errorf("keyword search of %q: memories: %w", npc, err)
	}
	for _, m := range ms {
		text := m.Content
		if m.Entity != "" {
			text += "\n" + m.Entity
		}
		x.add(item{id: m.ID, kind: kindMemory}, text)
	}
	var es []row
	if err := db.Model(&Entry{}).Select("id, content").Where("character_id = ?", npc).Order("id").Scan(&es).Error; err != nil {
		return nil, fmt.Errorf("keyword search of %q: journal: %w", npc, err)
	}
	for _, e := range es {
		x.add(item{id: e.ID, kind: kindJournal}, unstamped(e.Content))
	}
	var msgs []row
	if err := db.Raw(keywordMessagesSQL, npc, []string{character.StateLive, character.StateArchived}, false, searchableRoles).Scan(&msgs).Error; err != nil {
		return nil, fmt.Errorf("keyword search of %q: messages: %w", npc, err)
	}
	for _, m := range msgs {
		x.add(item{id: m.ID, kind: kindMessage}, unstamped(m.Content))
	}
	return x, nil
}

// kwHit is one keyword match: a row of a source table, its BM25 score
// (higher is better) and its item's position in the index, so ranking
// needs no look-up by row.
type kwHit struct {
	kind  itemKind
	p     int32 // beside kind, where it takes no room of its own
	id    int64
	score float64
}
