package sleep

// ProvenanceFromBatch is provenance, for the tests of package sleep_test.
var ProvenanceFromBatch = provenance
