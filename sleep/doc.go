// Package sleep owns what happens while an NPC rests: compaction (cut at a
// turn boundary, mask, summarize into a [CONTEXT SUMMARY], archive — never
// delete), consolidation of the journal into long-term memories, and the
// gocron schedule that runs a sleep per NPC on the game's clock.
//
// Runner tells a sleep top to bottom: skipped when nothing changed,
// consolidation, compaction past the sleep threshold (planned and committed
// under the NPC's lock, summarized outside it), the sleep mark. It takes the
// per-NPC lock it shares with ticks as a Locker, and the compactor and
// consolidator as small interfaces; the Scheduler and the engine's Sleep
// both run it.
//
// It must not import tick or api. The tick engine calls the compactor for
// masking and emergency, overflow and manual compaction; cmd/npcd builds the
// locks, the runner, the scheduler and the engine, and connects them.
package sleep
