// Package freelist keeps values for reuse (List): borrowers take one when
// they start and give it back when they end, so that a world of many NPCs
// holds about as many as are in use at once, not one per NPC.
package freelist
