// Package character owns the NPC: its persona and settings, entity profiles
// (beliefs kept as facts with validity), its inbox of perceived events, its
// conversation history (messages with token counts computed once and stored,
// grouped in turns, live or archived, never deleted by compaction), the
// running totals that make a budget check O(1), and the stored answers of
// committed ticks (by tick and idempotency key, ordered for the action feed).
//
// It must not import tick, sleep, api or go-openai. The tick engine, the
// compactor, the API's inspection views and the tools call it.
package character
