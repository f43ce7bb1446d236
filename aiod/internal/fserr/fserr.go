package fserr

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// Error types. Clients branch on these, so they never change.
const (
	NotFound           = "not_found"
	PermissionDenied   = "permission_denied"
	AlreadyExists      = "already_exists"
	InvalidTarget      = "invalid_target"
	InvalidPath        = "invalid_path"
	BadRequest         = "bad_request"
	DecodeError        = "decode_error"
	NoSpaceLeft        = "no_space_left"
	ReadOnlyFilesystem = "read_only_filesystem"
	IOError            = "io_error"
	// Busy is a transient cause (EAGAIN, EBUSY, ETXTBSY, EINTR, EMFILE,
	// ENFILE): the only error_type with retryable true.
	Busy = "busy"
)

// Error is a failed file operation as the client sees it. The JSON keys
// are in the order aiod writes them.
type Error struct {
	Errno         *int    `json:"errno"`
	ErrnoName     *string `json:"errno_name"`
	ErrorType     string  `json:"error_type"`
	ExceptionType *string `json:"exception_type"`
	Message       string  `json:"message"`
	Operation     string  `json:"operation"`
	Path          string  `json:"path"`
	Retryable     bool    `json:"retryable"`

	kind error // set by WithKind
}

func (e *Error) Error() string { return e.Message }

// kinds is the error_type → kind table; with api's kind → status table
// it gives the /v2/fs status of each type: not_found 404,
// permission_denied 403, already_exists 409, bad_request, invalid_path
// and invalid_target 400, decode_error 422, no_space_left 507. The
// rest (io_error, read_only_filesystem, busy) is ErrInternal, 500, as the
// published API answers them; busy says it is worth retrying through
// retryable, not through its status.
var kinds = map[string]error{
	NotFound:         api.ErrNotFound,
	PermissionDenied: api.ErrForbidden,
	AlreadyExists:    api.ErrConflict,
	BadRequest:       api.ErrInvalid,
	InvalidPath:      api.ErrInvalid,
	InvalidTarget:    api.ErrInvalid,
	DecodeError:      api.ErrUnprocessable,
	NoSpaceLeft:      api.ErrNoSpace,
}

// Unwrap returns the error's kind (see [Error.Kind]), so
// errors.Is(err, api.ErrNotFound) holds for a not_found error.
func (e *Error) Unwrap() error { return e.Kind() }

// Kind is the api kind of the error: the one [Error.WithKind] set, else
// the one its error_type stands for.
func (e *Error) Kind() error {
	if e.kind != nil {
		return e.kind
	}
	if k, ok := kinds[e.ErrorType]; ok {
		return k
	}
	return api.ErrInternal
}

// WithKind sets a kind that outranks the error_type's (a transfer past
// its limit is an io_error answered 413: api.ErrTooLarge) and returns e.
func (e *Error) WithKind(kind error) *Error { e.kind = kind; return e }

// Answer is the envelope the error answers with: its message, and the
// error object itself as data.
func (e *Error) Answer() *api.Error { return &api.Error{Kind: e.Kind(), Message: e.Message, Data: e} }

// Status is the /v2/fs HTTP status of the error (api's table).
func (e *Error) Status() int { return api.Status(e) }

// Failed200 is the override of the v1 routes (/v1/file, v1 watchers):
// a file error answers 200 with success false, but one past a transfer
// limit keeps its 413.
func Failed200(err error) (int, bool) {
	var fe *Error
	return http.StatusOK, errors.As(err, &fe) && !errors.Is(err, api.ErrTooLarge)
}

// verbs is the phrase after "Failed to " for each operation. "search" is
// /v1/file/search, a regexp over one file; "find" is the name search of
// /v2/fs/search and /v1/file/find.
var verbs = map[string]string{
	"read": "read file", "write": "write file", "replace": "replace in file", "edit": "edit file",
	"upload": "upload file", "download": "download file", "stat": "stat path", "list": "list directory",
	"search": "search file", "find": "find files", "glob": "glob files", "grep": "grep files",
	"mkdir": "create directory", "copy": "copy path", "move": "move path", "delete": "delete path",
	"tree": "transfer tree",
}

// ErrNotRegular marks an operation refused because its path is a FIFO,
// socket or device, whose content the daemon does not read or replace
// (opening one could block forever). From makes it invalid_target with
// the message "Failed to <verb>: not a regular file".
var ErrNotRegular = errors.New("not a regular file")

// Phrase is "Failed to <verb>" for the operation, the start of every
// message.
func Phrase(op string) string {
	if v, ok := verbs[op]; ok {
		return "Failed to " + v
	}
	return "Failed to " + op
}

// From classifies err, the failure of operation op on path (as the client
// wrote it). An errno anywhere in err's chain decides the type and the
// message, which reads as Rust's std::io::Error does:
// "Failed to read file: No such file or directory (os error 2)". An
// *Error passes through unchanged; ErrNotRegular is invalid_target;
// the sandbox's ErrBusy (no thread of its view free) is busy, retryable,
// of its kind (HTTP 503 on /v2); anything else is an io_error.
func From(op, path string, err error) *Error {
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	if errors.Is(err, ErrNotRegular) {
		return New(op, path, InvalidTarget, Phrase(op)+": "+ErrNotRegular.Error())
	}
	if errors.Is(err, sandbox.ErrBusy) {
		return New(op, path, Busy, Phrase(op)+": "+sandbox.ErrBusy.Error()).WithKind(sandbox.ErrBusy)
	}
	no, ok := errnoOf(err)
	if !ok {
		return New(op, path, IOError, fmt.Sprintf("%s: %v", Phrase(op), err))
	}
	return Errno(op, path, no)
}

// errnoOf is the errno err carries, or the one its kind stands for.
func errnoOf(err error) (syscall.Errno, bool) {
	var no syscall.Errno
	switch {
	case errors.As(err, &no):
		return no, true
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, exec.ErrNotFound):
		return syscall.ENOENT, true
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST, true
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES, true
	}
	return 0, false
}

// Text words any error as the daemon does (Rust io): the errno's
// capitalised text and number, never Go's error text; "unexpected
// operating system error" when it carries no errno.
func Text(err error) string {
	if no, ok := errnoOf(err); ok {
		return IOText(no)
	}
	return "unexpected operating system error"
}

// Errno is the error for a bare errno.
func Errno(op, path string, no syscall.Errno) *Error {
	n := int(no)
	e := &Error{
		Errno:     &n,
		ErrorType: typeOf(no),
		Message:   fmt.Sprintf("%s: %s", Phrase(op), IOText(no)),
		Operation: op,
		Path:      path,
	}
	if name, ok := names[no]; ok {
		e.ErrnoName = &name
	}
	ex := exceptionOf(no)
	e.ExceptionType = &ex
	e.Retryable = e.ErrorType == Busy
	return e
}

// New is an error without an errno (a malformed pattern, a non-UTF-8
// text, a relative path): errno, errno_name are null; the exception type
// follows the error type.
func New(op, path, errorType, msg string) *Error {
	e := &Error{ErrorType: errorType, Message: msg, Operation: op, Path: path}
	ex := "OSError"
	switch errorType {
	case BadRequest, InvalidPath:
		ex = "ValueError"
	case DecodeError:
		ex = "UnicodeDecodeError"
	case NotFound:
		ex = "FileNotFoundError"
	case AlreadyExists:
		ex = "FileExistsError"
	case PermissionDenied:
		ex = "PermissionError"
	}
	e.ExceptionType = &ex
	e.Retryable = errorType == Busy
	return e
}

// WithErrno is New with an errno that the daemon decided on itself (a
// pre-check finding the destination exists, say).
func WithErrno(op, path, msg string, no syscall.Errno) *Error {
	e := Errno(op, path, no)
	e.Message = msg
	return e
}

// IOText is Rust's Display of an io::Error from an errno: glibc's
// strerror text and "(os error N)". Go's own texts are glibc's with a
// lower-case first letter.
func IOText(no syscall.Errno) string {
	s := no.Error()
	if len(s) > 0 && s[0] >= 'a' && s[0] <= 'z' {
		s = string(s[0]-'a'+'A') + s[1:]
	}
	return fmt.Sprintf("%s (os error %d)", s, int(no))
}

func typeOf(no syscall.Errno) string {
	switch no {
	case syscall.ENOENT:
		return NotFound
	case syscall.EACCES, syscall.EPERM:
		return PermissionDenied
	case syscall.EEXIST:
		return AlreadyExists
	case syscall.EISDIR, syscall.ENOTDIR, syscall.ENOTEMPTY:
		return InvalidTarget
	case syscall.ENAMETOOLONG, syscall.EINVAL, syscall.ELOOP:
		return InvalidPath
	case syscall.ENOSPC, syscall.EDQUOT:
		return NoSpaceLeft
	case syscall.EROFS:
		return ReadOnlyFilesystem
	case syscall.EAGAIN, syscall.EBUSY, syscall.ETXTBSY, syscall.EINTR, syscall.EMFILE, syscall.ENFILE:
		return Busy
	case syscall.EFBIG:
		return BadRequest
	}
	return IOError
}

// exceptionOf is CPython's errno → OSError subclass table.
func exceptionOf(no syscall.Errno) string {
	switch no {
	case syscall.EAGAIN, syscall.EALREADY, syscall.EINPROGRESS:
		return "BlockingIOError"
	case syscall.ECHILD:
		return "ChildProcessError"
	case syscall.EPIPE, syscall.ESHUTDOWN:
		return "BrokenPipeError"
	case syscall.ECONNABORTED:
		return "ConnectionAbortedError"
	case syscall.ECONNREFUSED:
		return "ConnectionRefusedError"
	case syscall.ECONNRESET:
		return "ConnectionResetError"
	case syscall.EEXIST:
		return "FileExistsError"
	case syscall.ENOENT:
		return "FileNotFoundError"
	case syscall.EISDIR:
		return "IsADirectoryError"
	case syscall.ENOTDIR:
		return "NotADirectoryError"
	case syscall.EINTR:
		return "InterruptedError"
	case syscall.EACCES, syscall.EPERM:
		return "PermissionError"
	case syscall.ESRCH:
		return "ProcessLookupError"
	case syscall.ETIMEDOUT:
		return "TimeoutError"
	}
	return "OSError"
}

var names = map[syscall.Errno]string{
	syscall.EPERM: "EPERM", syscall.ENOENT: "ENOENT", syscall.ESRCH: "ESRCH", syscall.EINTR: "EINTR",
	syscall.EIO: "EIO", syscall.ENXIO: "ENXIO", syscall.E2BIG: "E2BIG", syscall.EBADF: "EBADF",
	syscall.ECHILD: "ECHILD", syscall.EAGAIN: "EAGAIN", syscall.ENOMEM: "ENOMEM", syscall.EACCES: "EACCES",
	syscall.EFAULT: "EFAULT", syscall.EBUSY: "EBUSY", syscall.EEXIST: "EEXIST", syscall.EXDEV: "EXDEV",
	syscall.ENODEV: "ENODEV", syscall.ENOTDIR: "ENOTDIR", syscall.EISDIR: "EISDIR", syscall.EINVAL: "EINVAL",
	syscall.ENFILE: "ENFILE", syscall.EMFILE: "EMFILE", syscall.ENOTTY: "ENOTTY", syscall.ETXTBSY: "ETXTBSY",
	syscall.EFBIG: "EFBIG", syscall.ENOSPC: "ENOSPC", syscall.ESPIPE: "ESPIPE", syscall.EROFS: "EROFS",
	syscall.EMLINK: "EMLINK", syscall.EPIPE: "EPIPE", syscall.ENAMETOOLONG: "ENAMETOOLONG",
	syscall.ENOTEMPTY: "ENOTEMPTY", syscall.ELOOP: "ELOOP", syscall.EDQUOT: "EDQUOT",
	syscall.EOPNOTSUPP: "EOPNOTSUPP", syscall.ETIMEDOUT: "ETIMEDOUT", syscall.ECONNREFUSED: "ECONNREFUSED",
	syscall.ECONNRESET: "ECONNRESET", syscall.ENOSYS: "ENOSYS",
}

// IsTransient reports whether err carries a transient errno, one a
// client may retry unchanged.
func IsTransient(err error) bool {
	var no syscall.Errno
	return errors.As(err, &no) && typeOf(no) == Busy
}

// Resolve maps a client path to the one to operate on: an absolute path
// as given, a relative one joined to workspace. An empty path or one
// holding NUL is an invalid_path error for op, echoing p.
func Resolve(op, workspace, p string) (string, *Error) {
	switch {
	case p == "":
		return "", New(op, p, InvalidPath, Phrase(op)+": path is empty")
	case strings.IndexByte(p, 0) >= 0:
		return "", New(op, p, InvalidPath, Phrase(op)+": file name contained an unexpected NUL byte")
	case filepath.IsAbs(p):
		return p, nil
	}
	return filepath.Join(workspace, p), nil
}
