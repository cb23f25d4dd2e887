package character

import "time"

// Unprepared returns s running every statement through gorm, as it does on
// PostgreSQL.
func Unprepared(s *Store) *Store {
	c := *s
	c.prep = nil
	return &c
}

// PreparedCount is how many statements s keeps prepared.
func PreparedCount(s *Store) int { return s.prep.Len() }

// LatestMessageSQL is the statement of LatestMessageID.
const LatestMessageSQL = latestMessageSQL

// SetClockReadAt sets when s last read the world's clock fresh.
func SetClockReadAt(s *Store, at time.Time) {
	s.clock.mu.Lock()
	s.clock.fresh = at
	s.clock.mu.Unlock()
}
