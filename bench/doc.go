// Package bench measures npcd in-process (`npcd bench`): tick throughput and
// npcd's own overhead per tick, in-process or through the daemon's HTTP API;
// prompt tokens per tick against an unbounded history and a truncation
// baseline, with planted facts; one NPC's long life (a game-year of events
// and nightly sleeps) reported per tenth; the cost of a budget check, of
// planning a compaction, of masking; the wall time of a sleep sweep and the
// idle cost of many sleep schedules.
//
// It drives the real engine with the builtin model on temporary databases.
// It does not wire npcd itself: cmd/npcd hands it a Harness that opens the
// daemon's own wiring (World) or serves the daemon on a loopback port. It
// must not import cmd, scenarios, eval or aihistory.
package bench
