// Package eval replays conversation benchmarks through the real tick engine
// and scores what the NPC's memory search finds afterwards.
//
// LoCoMo (long conversations between two people over many sessions) is the
// first: every turn becomes an event perceived by one listening NPC, a tick
// follows each turn on a small context window so that compaction runs as it
// would in a game, and each question of the benchmark is then put to the
// NPC's memory search, which is scored by evidence recall@k — the share of
// the turns the benchmark names as evidence that the top k results cite.
//
// It may import tick, sleep, character, journal, tools, llm and store; it
// must not import api or cmd. cmd/npcd runs it as `npcd eval locomo`,
// parsing the flags; WithSleep adds what the daemon adds (the compactor
// and the consolidator, sleeps between sessions) through Options.Configure
// and Options.AfterSession.
package eval
