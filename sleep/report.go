package sleep

// Report is what one sleep did, in the shape of the API's sleep response.
type Report struct {
	// Consolidated is how many journal entries were consolidated.
	Consolidated int `json:"consolidated"`
	// MemoriesAdded, MemoriesSuperseded and MemoriesSkipped count what the
	// merge did with each extracted fact.
	MemoriesAdded      int `json:"memories_added"`
	MemoriesSuperseded int `json:"memories_superseded"`
	MemoriesSkipped    int `json:"memories_skipped"`
	// ProfilesUpdated counts entity facts added or revised.
	ProfilesUpdated int `json:"profiles_updated"`
	// Reflections counts reflection entries written.
	Reflections int `json:"reflections"`
	// Extractor is who extracted the facts: llm or fallback.
	Extractor string `json:"extractor,omitempty"`
	// Compaction is the compaction this sleep ran, or nil.
	Compaction *Record `json:"compaction"`
	// Skipped is true when nothing changed since the last sleep.
	Skipped bool `json:"skipped"`
	// Note explains a skip or a compaction that could not commit.
	Note       string `json:"note,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// Consolidation is what consolidating an NPC's journal did.
type Consolidation struct {
	Entries         int    // journal entries consolidated
	Added           int    // memories added
	Superseded      int    // memories added that replaced an older one
	Skipped         int    // facts already known
	ProfilesUpdated int    // entity facts added or revised
	Reflections     int    // reflection entries written
	Extractor       string // llm or fallback
}

// summaryID is the id of the summary message the sleep's compaction wrote,
// or 0.
func (r *Report) summaryID() int64 {
	if r.Compaction == nil {
		return 0
	}
	return r.Compaction.SummaryMessageID
}
