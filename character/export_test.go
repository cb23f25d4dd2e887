package character

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
