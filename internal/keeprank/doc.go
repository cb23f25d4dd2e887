// Package keeprank orders the NPCs whose cached state a cache over its
// budget drops (DropOrder). A game that ticks its NPCs in turn uses next
// the NPC it used least recently, so dropping the least recently used
// first would have every tick build its state again once the NPCs outgrow
// the cache; dropping in an order fixed per NPC (Of) keeps most of them,
// and about the share that does not fit is built again. The most recently
// used eighth is dropped last, so an NPC used often stays.
package keeprank
