// Package keylock is a map of locks keyed by string, which a waiter can give
// up on when its context ends: the engine's per-NPC lock and the one that
// keeps two sleeps of an NPC apart. It imports no npcd package.
package keylock
