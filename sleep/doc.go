// Package sleep owns what happens while an NPC rests: compaction (cut at a
// turn boundary, mask, summarize into a [CONTEXT SUMMARY], archive — never
// delete), consolidation of the journal into long-term memories, and the
// gocron schedule that runs a sleep per NPC on the game's clock, with a
// database-backed locker (SlotLocker) so that daemons sharing a database
// run each scheduled sleep once.
//
// It must not import tick or api. The tick engine calls the compactor for
// emergency and overflow compaction; cmd/npcd wires the scheduler to the
// engine's sleep.
package sleep
