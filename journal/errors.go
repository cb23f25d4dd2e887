package journal

import "errors"

// Errors returned by this package. Storage errors from gorm are wrapped with
// context; gorm's not-found never leaks past this package.
var (
	ErrNotFound = errors.New("journal: not found")
	ErrInvalid  = errors.New("journal: invalid")
	// ErrBadOption is returned by NewRetriever for an option out of range.
	ErrBadOption = errors.New("journal: bad option")
	// ErrEmbedding wraps an embedder's failure or a vector of the wrong size.
	ErrEmbedding = errors.New("journal: embedding failed")
)

// errReset tells a search that rows vanished under an NPC's index (the NPC
// was deleted, maybe made again); the index is rebuilt and the search
// retried once.
var errReset = errors.New("journal: index reset")

// errFloored tells a build that its index outgrew the cache's budget with
// its vectors released: the NPC's floor rose (see floorFor), and the index
// is built again above it.
var errFloored = errors.New("journal: index floored")
