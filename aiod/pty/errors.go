package pty

import (
	"net/http"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Kinds of [Error], the shared api kinds under the plane's names; match
// them with errors.Is. Their statuses are api's table ([api.Status]).
var (
	// ErrNotFound: an unknown or closed session. HTTP 404 (a DELETE of
	// one answers 200 with success false).
	ErrNotFound = api.ErrNotFound
	// ErrInvalid: a value or an operation the engine refuses. HTTP 400.
	ErrInvalid = api.ErrInvalid
	// ErrLimit: every terminal slot is taken and none can be evicted.
	// HTTP 400 on the routes that create terminals, as the published API
	// answers it ([capacity400]).
	ErrLimit = api.ErrLimit
	// ErrNotImplemented: exec in a shell that is not bash or sh. HTTP 501.
	ErrNotImplemented = api.ErrNotImplemented
	// ErrUnavailable: no shell, an unusable default user, or an engine
	// that is shutting down. HTTP 503.
	ErrUnavailable = api.ErrUnavailable
)

// Error is the plane's refusal (see [api.Error]); its Kind is one of
// the Err* values above.
type Error = api.Error

func newErr(kind error, msg, hint string) error { return &Error{Kind: kind, Message: msg, Hint: hint} }
func invalid(msg string) error                  { return newErr(ErrInvalid, msg, "") }
func notFound(id string) error                  { return newErr(ErrNotFound, "Session not found: "+id, "") }

// errBusy is the answer to a second exec while one runs.
var errBusy = invalid("Session already has a running command")

// The published API's exceptions to api's status table, by route.
var (
	// capacity400: a full terminal table is a 400 where terminals are
	// created (evict-or-400, as for command sessions).
	capacity400 = api.AsStatus(ErrLimit, http.StatusBadRequest)
	// gone200: closing a terminal that is already gone answers 200 with
	// success false.
	gone200 = api.AsStatus(ErrNotFound, http.StatusOK)
)
