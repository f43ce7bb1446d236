package commands

import (
	"errors"
	"net/http"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Kinds of [Error]; match them with errors.Is.
var (
	// ErrNotFound: an unknown (or dropped) command or session id. HTTP 404.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: a value or an operation the engine refuses. HTTP 400.
	ErrInvalid = errors.New("invalid request")
	// ErrNotRunning: stdin or a signal for a command that has ended. HTTP 400.
	ErrNotRunning = errors.New("command not running")
	// ErrUnavailable: a missing shell, an unusable default user, or an
	// engine that is shutting down. HTTP 503.
	ErrUnavailable = errors.New("unavailable")
)

// Error is the plane's refusal (see [api.Error]); its Kind is one of
// the Err* values above.
type Error = api.Error

func notFound(msg string) error      { return &Error{Kind: ErrNotFound, Message: msg} }
func invalid(msg, hint string) error { return &Error{Kind: ErrInvalid, Message: msg, Hint: hint} }
func unavailable(msg, hint string) error {
	return &Error{Kind: ErrUnavailable, Message: msg, Hint: hint}
}
func notRunning(id string) error {
	return &Error{Kind: ErrNotRunning, Message: "Command " + id + " is not running"}
}
func sessionNotFound(id string) error { return notFound("Session not found: " + id) }
func commandNotFound(id string) error { return notFound("Command not found: " + id) }

// statusOf maps an engine error to its HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrNotRunning):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
