package keeprank

import (
	"cmp"
	"hash/maphash"
	"slices"
)

// seed is the process's: the order holds for its life.
var seed = maphash.MakeSeed()

// Of is NPC id's rank: those of lowest rank are dropped first. Ranks are
// spread evenly whatever the NPCs' ids.
func Of(id string) uint64 { return maphash.String(seed, id) }

// Entry is an NPC whose cached state a cache may drop, and when it was
// last used, on any clock that grows.
type Entry struct {
	ID   string
	Used int64
}

// DropOrder sorts es into the order a cache over its budget drops them:
// all but the most recently used eighth first, lowest rank (Of) first,
// then that eighth, least recently used first. An NPC used often stays in
// the recent eighth.
func DropOrder(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return cmp.Compare(a.Used, b.Used) })
	older := es[:len(es)*7/8]
	rs := make([]ranked, len(older))
	for i, e := range older {
		rs[i] = ranked{Of(e.ID), e}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int { return cmp.Compare(a.rank, b.rank) })
	for i := range rs {
		older[i] = rs[i].e
	}
}

// ranked is an entry with its rank, computed once for a sort.
type ranked struct {
	rank uint64
	e    Entry
}
