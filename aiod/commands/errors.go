package commands

import (
	"fmt"
	"net/http"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Kinds of [Error]: the shared api kinds, whose statuses come from
// api's one table; match them with errors.Is.
var (
	// ErrNotFound: an unknown (or dropped) command or session id. HTTP 404.
	ErrNotFound = api.ErrNotFound
	// ErrInvalid: a value or an operation the engine refuses. HTTP 400.
	ErrInvalid = api.ErrInvalid
	// ErrNotRunning: stdin or a signal for a command that has ended; an
	// ErrInvalid (HTTP 400) that callers can tell apart.
	ErrNotRunning = api.NewKind("command not running", api.ErrInvalid)
	// ErrBusy: the session limit is reached and every session is running
	// a command, so none can be evicted. The table says 429; the routes
	// that create sessions answer 400, as the published API does
	// ([sessionsFull]).
	ErrBusy = api.ErrBusy
	// ErrUnavailable: a missing shell, an unusable default user, or an
	// engine that is shutting down. HTTP 503.
	ErrUnavailable = api.ErrUnavailable
)

// sessionsFull is the override of the routes that may create a session:
// the published API answers "all sessions busy" with 400.
var sessionsFull = []api.Override{api.AsStatus(ErrBusy, http.StatusBadRequest)}

// Error is the plane's refusal (see [api.Error]); its Kind is one of
// the Err* values above.
type Error = api.Error

func notFound(msg string) error { return api.NewError(ErrNotFound, msg) }
func invalid(msg, hint string) error {
	return api.NewError(ErrInvalid, msg).WithHint(hint)
}
func unavailable(msg, hint string) error {
	return api.NewError(ErrUnavailable, msg).WithHint(hint)
}
func notRunning(id string) error {
	return api.NewError(ErrNotRunning, "Command "+id+" is not running")
}
func sessionNotFound(id string) error { return notFound("Session not found: " + id) }
func commandNotFound(id string) error { return notFound("Command not found: " + id) }

// allBusy is the refusal of a new session when the limit is reached and
// no session is idle enough to be evicted.
func allBusy(max int) error {
	return api.NewError(ErrBusy, fmt.Sprintf("Maximum number of sessions (%d) reached and all are busy", max)).
		WithHint(fmt.Sprintf("every one of the AIO_BASH_MAX_SESSIONS=%d sessions is running a command: close one "+
			"(DELETE /v2/commands/sessions/{id}), wait for a command to finish, or raise AIO_BASH_MAX_SESSIONS", max))
}
