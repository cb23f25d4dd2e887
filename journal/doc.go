// Package journal owns what an NPC remembers beyond its live context: journal
// entries (observations, conversations, reflections, notes, facts and the
// context_synthesis entries compaction writes), their importance scores, the
// long-term memories consolidation makes from them, and retrieval over all of
// it — messages of package character included, archived ones too, so nothing
// compacted is out of reach.
//
// Retrieval is hybrid. The Retriever's keyword channel is BM25 computed in
// Go over each NPC's in-memory index, with that NPC's own statistics, so a
// search reads only the NPC's rows and its ranking never depends on other
// NPCs (with a length normalization below the usual, WithLengthNorm, so
// short chit-chat does not crowd out the lines that tell what happened); a query word also reaches, at a lower weight, the words of the
// NPC's index with the same Snowball stem (WithExpansion), and what the
// people a query names said, and the memories about them, gain relevance
// (WithEntity). Store.Search, the plain keyword search without an index in memory,
// ranks with the same BM25 in Go over the NPC's rows, read at each call, on
// both dialects; the database keeps no full-text index (migration 5 dropped
// those of migrations 3 and 4). Vector search ranks, in Go, vectors from an llm.Embedder (an
// OpenAI-compatible endpoint, or llm.OfflineEmbedder), cached by content
// hash in the embeddings table and decoded per NPC in memory. A third,
// semantic channel (WithSemantic) compares meanings: every row gets a
// sentence vector from offline word vectors (internal/wordvec) when it
// enters the NPC's index, so a paraphrase sharing no word with the query
// is still found. The Retriever blends them with recency on the game's clock and
// importance, and keeps superseded memories below their replacements. A hit
// on a perceived message brings its neighbouring turn into the same result
// (a question and its reply), and a result cites exactly what it shows.
// The keyword channel searches a second time for the most telling words of
// the best-matching lines (pseudo-relevance feedback, WithFeedback), so
// lines that tell the same story in other words come next.
// What was said on the game day of the best matches gains a little
// (WithSession): the rest of the sitting they come from is likely part of
// the same story.
//
// SearchWith bounds a search's work by its query instead of the NPC's
// life (SearchOptions): the channels that scan every row scan the most
// recent ones, a frequent word's postings are read in its most recent
// rows, and feedback can be skipped. The tick's working context searches
// so at every tick; Search, which memory_search runs, is unbounded.
//
// Relative dates ("yesterday", "last Friday", "next month") are grounded
// when entries and memories are written (GroundDates): the absolute date
// is written beside the expression, so search matches on it.
//
// It must not import tick, sleep or api. The tick engine writes entries and
// retrieves for prompts (a Retriever is its tick.Retriever); tools run
// memory_search through it; sleep consolidates through it (AddMemory,
// Supersede, MemoriesByHash, NearDuplicates); the API's inspection views
// read it.
package journal
