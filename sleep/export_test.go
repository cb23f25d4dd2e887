package sleep

// ProvenanceFromBatch is provenance, for the tests of package sleep_test.
var ProvenanceFromBatch = provenance

// ChunkTranscript is chunkTranscript, for the tests of package sleep_test.
var ChunkTranscript = chunkTranscript
