package sleep

// ProvenanceFromBatch is provenance, for the tests of package sleep_test.
var ProvenanceFromBatch = provenance

// ChunkTranscript is chunkTranscript, for the tests of package sleep_test.
var ChunkTranscript = chunkTranscript

// WriteRecord and FinishRecord are the commit's writes of a compaction's
// record, for the tests of package sleep_test.
var (
	WriteRecord  = (*Compactor).writeRecord
	FinishRecord = (*Compactor).finishRecord
)

// Unprepared returns c writing its records through gorm, as it does on
// PostgreSQL; PreparedCount is how many statements c keeps prepared.
func Unprepared(c *Compactor) *Compactor {
	d := *c
	d.prep = nil
	return &d
}

func PreparedCount(c *Compactor) int { return c.prep.Len() }
