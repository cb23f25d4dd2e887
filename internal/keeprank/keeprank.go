package keeprank

import "hash/maphash"

// seed is the process's: the order holds for its life.
var seed = maphash.MakeSeed()

// Of is NPC id's rank: those of lowest rank are dropped first. Ranks are
// spread evenly whatever the NPCs' ids.
func Of(id string) uint64 { return maphash.String(seed, id) }
