package code

import (
	"errors"
	"net/http"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Kinds of [Error]; match them with errors.Is.
var (
	// ErrInvalid: a field value the plane refuses. HTTP 422.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: an unknown session id. HTTP 404.
	ErrNotFound = errors.New("not found")
	// ErrLimit: a session past the tier's cap. HTTP 429.
	ErrLimit = errors.New("session limit reached")
	// ErrUnavailable: no interpreter (or no ipykernel) for the language,
	// or an engine that is closing. HTTP 503.
	ErrUnavailable = errors.New("unavailable")
	// ErrNotImplemented: a route this daemon does not serve. HTTP 501.
	ErrNotImplemented = errors.New("not implemented")
)

// Error is the plane's refusal (see [api.Error]); its Kind is one of
// the Err* values above.
type Error = api.Error

func invalid(field, msg string) error { return &Error{Kind: ErrInvalid, Field: field, Message: msg} }

func unavailable(msg, hint string) error {
	return &Error{Kind: ErrUnavailable, Message: msg, Hint: hint}
}

// statusOf maps an engine error to its HTTP status.
func statusOf(err error) int {
	for _, k := range []struct {
		kind   error
		status int
	}{{ErrInvalid, http.StatusUnprocessableEntity}, {ErrNotFound, http.StatusNotFound}, {ErrLimit, http.StatusTooManyRequests},
		{ErrUnavailable, http.StatusServiceUnavailable}, {ErrNotImplemented, http.StatusNotImplemented}} {
		if errors.Is(err, k.kind) {
			return k.status
		}
	}
	return http.StatusInternalServerError
}

// asError returns err as an *Error, wrapping an unexpected one in a
// generic message so that no Go error text reaches a client.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Message: "Internal error"}
}
