package code

import (
	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Kinds of [Error], the shared api kinds under the plane's names; match
// them with errors.Is.
var (
	// ErrInvalid: a field value the plane refuses. HTTP 422 (on the v1
	// routes the validation body, naming the field).
	ErrInvalid = api.ErrUnprocessable
	// ErrNotFound: an unknown session id. HTTP 404.
	ErrNotFound = api.ErrNotFound
	// ErrLimit: a session past the tier's cap. HTTP 429.
	ErrLimit = api.ErrLimit
	// ErrBusy: a session with too many runs queued. HTTP 429.
	ErrBusy = api.ErrBusy
	// ErrUnavailable: no interpreter (or no ipykernel) for the language,
	// or an engine that is closing. HTTP 503.
	ErrUnavailable = api.ErrUnavailable
	// ErrNotImplemented: a route this daemon does not serve. HTTP 501.
	ErrNotImplemented = api.ErrNotImplemented
)

// Error is the plane's refusal (see [api.Error]); its Kind is one of
// the Err* values above.
type Error = api.Error

func invalid(field, msg string) error { return &Error{Kind: ErrInvalid, Field: field, Message: msg} }

func unavailable(msg, hint string) error {
	return &Error{Kind: ErrUnavailable, Message: msg, Hint: hint}
}
