package tick

import "errors"

// Errors returned by the engine. Errors from the stores (character.ErrNotFound,
// character.ErrInboxFull, ...) and model failures (*llm.Error) pass through
// wrapped, so callers sort them with errors.Is and llm.CodeOf.
var (
	ErrInvalid  = errors.New("tick: invalid input")
	ErrConflict = errors.New("tick: conflict")
	ErrBusy     = errors.New("tick: too busy")
	ErrClosed   = errors.New("tick: engine closed")
)

// InputError is a bad request naming its field. It matches ErrInvalid.
type InputError struct {
	Field   string
	Message string
}

func (e *InputError) Error() string { return e.Field + ": " + e.Message }

// Unwrap makes an InputError match ErrInvalid.
func (e *InputError) Unwrap() error { return ErrInvalid }

// ConflictError is a request that does not fit the NPC's current state,
// naming the field. It matches ErrConflict.
type ConflictError struct {
	Field   string
	Message string
}

func (e *ConflictError) Error() string { return e.Field + ": " + e.Message }

// Unwrap makes a ConflictError match ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// ValueError is a well-formed field whose value npcd cannot accept (a model
// that needs an endpoint npcd lacks, an actor posing as the NPC), naming the
// field. It matches ErrInvalid.
type ValueError struct {
	Field   string
	Message string
}

func (e *ValueError) Error() string { return e.Field + ": " + e.Message }

// Unwrap makes a ValueError match ErrInvalid.
func (e *ValueError) Unwrap() error { return ErrInvalid }
