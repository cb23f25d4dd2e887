package character

import "errors"

// Errors returned by this package. Storage errors from gorm are wrapped with
// context; gorm's not-found never leaks past this package.
var (
	ErrNotFound      = errors.New("character: not found")
	ErrInvalid       = errors.New("character: invalid")
	ErrInboxFull     = errors.New("character: inbox full")
	ErrNotAwaiting   = errors.New("character: no such pending tool call")
	ErrAlreadyAnswer = errors.New("character: tool call already answered")
	ErrDuplicateKey  = errors.New("character: idempotency key already used")
	ErrExists        = errors.New("character: already exists")
)
