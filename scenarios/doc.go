// Package scenarios lets designers script an NPC's life and check that it
// behaves and remembers. A YAML file defines the NPC, the model (builtin,
// scripted — replies matched to what the NPC perceives — or a real
// endpoint), steps (events, ticks, tool results, game clock advances,
// sleeps, compactions, repeats with templated text) and expectations after
// any step. Load validates a file before anything runs, reporting every
// problem with its line and field; Run plays it against an Env (the engine,
// its stores and a game clock) and reports each expectation that did not
// hold, with what was expected and what was found. The format is described
// in the README, section "For designers".
//
// It must not import api or cmd. It declares the small interfaces it needs
// (Engine, Characters, Journal, Compactions, Searcher, Clock). RunFiles is
// `npcd scenario run`: it validates the files, runs each on a new database
// with a GameClock, and prints the reports; cmd/npcd parses the flags and
// gives it an Opener that wires the daemon's own types, and runs the
// example scenarios in examples/ in go test.
package scenarios
