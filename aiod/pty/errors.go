package pty

import (
	"errors"
	"net/http"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Kinds of [Error]; match them with errors.Is.
var (
	// ErrNotFound: an unknown or closed session. HTTP 404.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: a value or an operation the engine refuses. HTTP 400.
	ErrInvalid = errors.New("invalid request")
	// ErrNotImplemented: exec in a shell that is not bash or sh. HTTP 501.
	ErrNotImplemented = errors.New("not implemented")
	// ErrUnavailable: no shell, an unusable default user, or an engine
	// that is shutting down. HTTP 503.
	ErrUnavailable = errors.New("unavailable")
)

// Error is the plane's refusal (see [api.Error]); its Kind is one of
// the Err* values above.
type Error = api.Error

func newErr(kind error, msg, hint string) error { return &Error{Kind: kind, Message: msg, Hint: hint} }
func invalid(msg string) error                  { return newErr(ErrInvalid, msg, "") }
func notFound(id string) error                  { return newErr(ErrNotFound, "Session not found: "+id, "") }

// errBusy is the answer to a second exec while one runs.
var errBusy = invalid("Session already has a running command")

// statusOf maps an engine error to its HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotImplemented):
		return http.StatusNotImplemented
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
