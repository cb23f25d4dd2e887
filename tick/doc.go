// Package tick is the engine that runs NPCs: it takes in what an NPC
// perceives (events, tool results posted by the game), serializes the ticks
// of each NPC while running different NPCs in parallel (across daemons
// sharing a database too, under each NPC's lease), keeps the context
// within budget (masking and emergency compaction), assembles the prompt,
// runs the model's step loop with tools, recovers from context overflow, and
// commits each turn in one transaction, with the answer the game gets: a
// tick under an idempotency key is never run twice, a committed answer can be
// fetched again, and the action feed reads them in commit order. NPCs with
// auto-tick are ticked by the engine itself once their input has settled
// (autotick.go), under the same per-NPC lock as every other tick.
//
// It must not import api or cmd. The API and cmd/npcd call it; it calls
// character, journal, tools, sleep, lease and llm.
package tick
