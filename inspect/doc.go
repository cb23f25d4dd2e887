// Package inspect answers what an NPC knows and why, for admins: read-only
// views over its stored history, journal, memories, profiles, tick records
// and compactions. It owns the views that need more than one store: the
// overview counts, the context as it was at an earlier tick (AsOf), the
// "what did we lose" report of a compaction (Diff) and the utilization
// timeline with its compaction markers.
//
// It reads every table through the package that owns it (character.Store,
// journal.Store, sleep.Records) and queries none itself. It only reads, so
// it works on a database opened read-only while a daemon writes it. It must not import tick, api, scenarios or cmd. The API's
// inspection routes call it; `npcd aihistory` reads it through the API.
package inspect
