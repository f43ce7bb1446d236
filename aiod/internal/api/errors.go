package api

import (
	"errors"
	"net/http"

	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

// The kinds of refusal every plane shares. A plane's error carries one
// of them as its [Error.Kind] (or a sub-kind made with [NewKind]);
// [Status] maps it to the HTTP status the published API gives it, and a
// route whose published status differs says so with an [Override].
// Match them with errors.Is.
var (
	// ErrInvalid: a value or an operation the plane refuses. HTTP 400.
	ErrInvalid = errors.New("invalid request")
	// ErrForbidden: the account may not do this. HTTP 403.
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: an unknown id or path. HTTP 404.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the target exists or is in a state that excludes the
	// request. HTTP 409.
	ErrConflict = errors.New("conflict")
	// ErrTooLarge: a body or a transfer past its limit. HTTP 413.
	ErrTooLarge = errors.New("too large")
	// ErrMediaType: a body that is not declared JSON on a JSON route.
	// HTTP 415.
	ErrMediaType = errors.New("unsupported media type")
	// ErrUnprocessable: a field that decoded but holds a value the route
	// refuses, or content that is not what the route reads (non-UTF-8
	// text). HTTP 422.
	ErrUnprocessable = errors.New("unprocessable")
	// ErrLimit: a cap (sessions, watchers) is reached. HTTP 429.
	ErrLimit = errors.New("limit reached")
	// ErrBusy: the target is occupied now and may take the request later
	// (a session's queue is full). HTTP 429, retryable.
	ErrBusy = errors.New("busy")
	// ErrInternal: anything the client cannot act on. HTTP 500. An error
	// with no kind at all is answered as this, with a generic message.
	ErrInternal = errors.New("internal error")
	// ErrNotImplemented: a route or variant this daemon does not serve
	// (or cannot on this machine). HTTP 501.
	ErrNotImplemented = errors.New("not implemented")
	// ErrUnavailable: a missing backend (interpreter, shell), a wait
	// that ended without its event, or a plane that is shutting down.
	// HTTP 503, retryable.
	ErrUnavailable = errors.New("unavailable")
	// ErrNoSpace: the disk or quota is full. HTTP 507.
	ErrNoSpace = errors.New("no space left")
)

// statuses is the one kind → status table. Sub-kinds find their parent
// through errors.Is, so the first row a kind matches decides.
var statuses = []struct {
	kind   error
	status int
}{
	{ErrInvalid, http.StatusBadRequest},
	{ErrForbidden, http.StatusForbidden},
	{ErrNotFound, http.StatusNotFound},
	{ErrConflict, http.StatusConflict},
	{ErrTooLarge, http.StatusRequestEntityTooLarge},
	{ErrMediaType, http.StatusUnsupportedMediaType},
	{ErrUnprocessable, http.StatusUnprocessableEntity},
	{ErrLimit, http.StatusTooManyRequests},
	{ErrBusy, http.StatusTooManyRequests},
	{ErrInternal, http.StatusInternalServerError},
	{ErrNotImplemented, http.StatusNotImplemented},
	{ErrUnavailable, http.StatusServiceUnavailable},
	{ErrNoSpace, http.StatusInsufficientStorage},
}

// Status is the HTTP status of err by its kind: the one table every
// plane answers from. An error of no kind is 500.
func Status(err error) int {
	for _, s := range statuses {
		if errors.Is(err, s.kind) {
			return s.status
		}
	}
	return http.StatusInternalServerError
}

// kind is a plane's own kind under a shared one.
type kind struct {
	name   string
	parent error
}

func (k *kind) Error() string { return k.name }
func (k *kind) Unwrap() error { return k.parent }

// NewKind returns a plane's own kind that is also parent (errors.Is
// holds for both), so it keeps parent's status: commands' "not running"
// is NewKind("command not running", ErrInvalid), a 400 that callers can
// still tell apart.
func NewKind(name string, parent error) error { return &kind{name: name, parent: parent} }

// Error is a plane's refusal: its Kind (one of the Err* values of this
// package, or a sub-kind), a client-facing message (never Go error text
// or a secret), an optional hint saying what to do about it, for a field
// error the body field it is about, and optional data for the
// envelope. Planes may alias it (type Error = api.Error).
type Error struct {
	Kind    error
	Message string
	Hint    string
	Field   string
	Data    any
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the kind, so errors.Is(err, api.ErrNotFound) works.
func (e *Error) Unwrap() error { return e.Kind }

// NewError is an [Error] of kind with the client-facing msg.
func NewError(kind error, msg string) *Error { return &Error{Kind: kind, Message: msg} }

// WithHint sets the hint and returns e.
func (e *Error) WithHint(hint string) *Error { e.Hint = hint; return e }

// WithField sets the body field the error is about and returns e.
func (e *Error) WithField(field string) *Error { e.Field = field; return e }

// WithData sets the envelope's data and returns e.
func (e *Error) WithData(data any) *Error { e.Data = data; return e }

// Answerer is an error that words itself for a client: a structured
// error kept in its own type (fserr.Error) returns the [Error] it
// answers as.
type Answerer interface {
	error
	Answer() *Error
}

// Refusal is err as the client sees it: an [Answerer]'s answer, an
// [*Error] itself, or for anything else an ErrInternal with a generic
// message (Go's error text never reaches a client).
func Refusal(err error) *Error {
	var a Answerer
	if errors.As(err, &a) {
		return a.Answer()
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: ErrInternal, Message: "Internal error"}
}

// MessageOf is the client-facing text and hint of err (see [Refusal]).
func MessageOf(err error) (msg, hint string) {
	e := Refusal(err)
	return e.Message, e.Hint
}

// Override changes the status of the refusals it covers on one route,
// where the published API differs from the [Status] table: it returns
// the status and true for an error it covers. Overrides are tried in
// order; the first that covers err decides.
type Override func(err error) (int, bool)

// AsStatus covers the errors of kind (or a sub-kind) with status: the
// commands plane's "all sessions busy" is AsStatus(ErrBusy, 400).
func AsStatus(kind error, status int) Override {
	return func(err error) (int, bool) { return status, errors.Is(err, kind) }
}

// Failed200 covers every refusal but ErrTooLarge (an HTTP-level limit)
// with 200: the v1 routes that answer a failure as success false.
func Failed200(err error) (int, bool) { return http.StatusOK, !errors.Is(err, ErrTooLarge) }

// StatusFor is err's status on a route with the given overrides.
func StatusFor(err error, over ...Override) int {
	for _, o := range over {
		if s, ok := o(err); ok {
			return s
		}
	}
	return Status(err)
}

// WriteError answers err: a *serde.Error as the 422 validation body,
// anything else as an unsuccessful envelope with the status of its kind
// (after the route's overrides), its message, hint and data.
func WriteError(w http.ResponseWriter, err error, over ...Override) {
	var se *serde.Error
	if errors.As(err, &se) {
		Invalid(w, se)
		return
	}
	e := Refusal(err)
	Fail(w, StatusFor(err, over...), e.Message, e.Data, e.Hint)
}
