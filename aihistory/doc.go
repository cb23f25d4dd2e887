// Package aihistory renders what an admin asks of an NPC — its overview,
// history, journal, profiles, memory search, compactions, the diff of what
// one lost, one item in full, the context as of an earlier tick, and the
// utilization timeline (in the terminal, or drawn to PNG or SVG) — from the
// inspection routes of the HTTP API, as tables for people or the API's JSON
// for machines.
//
// It reads through an api.Client only, so the same views serve a running
// daemon and a database file opened in-process. It must not import cmd;
// `npcd aihistory` in cmd/npcd parses the flags and runs a Session.
package aihistory
