// Package tools owns what an NPC can do: the game tools the game server
// declares (say and emote by default; returns:true tools whose results the
// game posts back), the internal tools npcd runs itself (journal_write,
// profile_update, memory_search, recall_archive), validation of every tool
// call's arguments against the tool's JSON Schema (offered to the model
// without the keywords that only bound a call, PromptSchema), and which
// tools' results may be masked.
//
// It must not import tick, sleep or api. The tick engine compiles an NPC's
// tool set, offers its definitions to the model and routes each call here.
package tools
