// Package lease gives each NPC one owner at a time across npcd daemons that
// share a database. A daemon takes an NPC's lease (a row of npc_leases:
// the NPC, the holder, an expiry) before it ticks, compacts or sleeps the
// NPC, keeps it while it works on the NPC and renews it in the background,
// and lets it go once the NPC has been idle for a while or when the daemon
// stops. A daemon that dies loses its leases when they expire. A daemon
// that already holds an NPC's unexpired lease does not touch the database
// to use it again, so on a single daemon leasing costs one write per NPC
// per idle period and one renewal statement per renewal period.
//
// It imports no npcd package but store; the tick engine declares what it
// needs of a lease (tick.Leaser) and cmd/npcd wires a *Manager to it.
package lease
