package fserr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

func TestTaxonomy(t *testing.T) {
	cases := []struct {
		no        syscall.Errno
		name      string
		typ       string
		exc       string
		status    int
		retryable bool
		text      string
	}{
		{syscall.ENOENT, "ENOENT", NotFound, "FileNotFoundError", 404, false, "No such file or directory (os error 2)"},
		{syscall.EACCES, "EACCES", PermissionDenied, "PermissionError", 403, false, "Permission denied (os error 13)"},
		{syscall.EPERM, "EPERM", PermissionDenied, "PermissionError", 403, false, "Operation not permitted (os error 1)"},
		{syscall.EEXIST, "EEXIST", AlreadyExists, "FileExistsError", 409, false, "File exists (os error 17)"},
		{syscall.EISDIR, "EISDIR", InvalidTarget, "IsADirectoryError", 400, false, "Is a directory (os error 21)"},
		{syscall.ENOTDIR, "ENOTDIR", InvalidTarget, "NotADirectoryError", 400, false, "Not a directory (os error 20)"},
		{syscall.ENOTEMPTY, "ENOTEMPTY", InvalidTarget, "OSError", 400, false, "Directory not empty (os error 39)"},
		{syscall.ENAMETOOLONG, "ENAMETOOLONG", InvalidPath, "OSError", 400, false, "File name too long (os error 36)"},
		{syscall.EINVAL, "EINVAL", InvalidPath, "OSError", 400, false, "Invalid argument (os error 22)"},
		{syscall.ELOOP, "ELOOP", InvalidPath, "OSError", 400, false, "Too many levels of symbolic links (os error 40)"},
		{syscall.ENOSPC, "ENOSPC", NoSpaceLeft, "OSError", 507, false, "No space left on device (os error 28)"},
		{syscall.EDQUOT, "EDQUOT", NoSpaceLeft, "OSError", 507, false, "Disk quota exceeded (os error 122)"},
		{syscall.EROFS, "EROFS", ReadOnlyFilesystem, "OSError", 500, false, "Read-only file system (os error 30)"},
		{syscall.EIO, "EIO", IOError, "OSError", 500, false, "Input/output error (os error 5)"},
		{syscall.EXDEV, "EXDEV", IOError, "OSError", 500, false, "Invalid cross-device link (os error 18)"},
		{syscall.EAGAIN, "EAGAIN", Busy, "BlockingIOError", 500, true, "Resource temporarily unavailable (os error 11)"},
		{syscall.EBUSY, "EBUSY", Busy, "OSError", 500, true, "Device or resource busy (os error 16)"},
		{syscall.ETXTBSY, "ETXTBSY", Busy, "OSError", 500, true, "Text file busy (os error 26)"},
		{syscall.EINTR, "EINTR", Busy, "InterruptedError", 500, true, "Interrupted system call (os error 4)"},
		{syscall.EMFILE, "EMFILE", Busy, "OSError", 500, true, "Too many open files (os error 24)"},
		{syscall.EFBIG, "EFBIG", BadRequest, "OSError", 400, false, "File too large (os error 27)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := From("read", "/x", &fs.PathError{Op: "open", Path: "/x", Err: c.no})
			if *e.Errno != int(c.no) || *e.ErrnoName != c.name || e.ErrorType != c.typ || *e.ExceptionType != c.exc ||
				e.Status() != c.status || e.Retryable != c.retryable || e.Message != "Failed to read file: "+c.text {
				t.Errorf("got %+v status %d", e, e.Status())
			}
		})
	}
}

// TestWireShape pins requirement 32/33: the same data on v1 (200) and v2
// (404), keys in aiod's order.
func TestWireShape(t *testing.T) {
	_, err := os.ReadFile("/definitely/not/here")
	e := From("read", "/definitely/not/here", err)
	want := `{"success":false,"message":"Failed to read file: No such file or directory (os error 2)","data":{"errno":2,"errno_name":"ENOENT","error_type":"not_found","exception_type":"FileNotFoundError","message":"Failed to read file: No such file or directory (os error 2)","operation":"read","path":"/definitely/not/here","retryable":false},"hint":null}` + "\n"
	for _, c := range []struct {
		over   []api.Override
		status int
	}{{[]api.Override{Failed200}, 200}, {nil, 404}} {
		rec := httptest.NewRecorder()
		api.WriteError(rec, e, c.over...)
		if rec.Code != c.status || rec.Body.String() != want {
			t.Errorf("%d %s", rec.Code, rec.Body.String())
		}
	}
}

// TestStatusTable pins each error_type's /v2/fs status (through api's
// table) and the v1 override, which a transfer limit escapes.
func TestStatusTable(t *testing.T) {
	for typ, want := range map[string]int{NotFound: 404, PermissionDenied: 403, AlreadyExists: 409, BadRequest: 400,
		InvalidPath: 400, InvalidTarget: 400, DecodeError: 422, NoSpaceLeft: 507, ReadOnlyFilesystem: 500, IOError: 500, Busy: 500} {
		e := New("read", "/p", typ, "m")
		if e.Status() != want {
			t.Errorf("%s: %d, want %d", typ, e.Status(), want)
		}
		if s, ok := Failed200(e); !ok || s != 200 {
			t.Errorf("%s on v1: %d %v", typ, s, ok)
		}
	}
	limit := New("tree", "/p", BadRequest, "too big").WithKind(api.ErrTooLarge)
	if limit.Status() != 413 || !errors.Is(limit, api.ErrTooLarge) || errors.Is(limit, api.ErrInvalid) {
		t.Errorf("a kind set by WithKind outranks the type's: %d", limit.Status())
	}
	if _, ok := Failed200(limit); ok {
		t.Error("a limit keeps its 413 on v1")
	}
	if _, ok := Failed200(api.NewError(api.ErrNotFound, "watcher")); ok {
		t.Error("Failed200 covers file errors only")
	}
}

func TestWithoutErrno(t *testing.T) {
	e := New("grep", "/w", BadRequest, "invalid regex")
	b, _ := json.Marshal(e)
	if string(b) != `{"errno":null,"errno_name":null,"error_type":"bad_request","exception_type":"ValueError","message":"invalid regex","operation":"grep","path":"/w","retryable":false}` || e.Status() != 400 {
		t.Error(string(b))
	}
	if From("x", "/p", e) != e {
		t.Error("an *Error must pass through")
	}
	if got := From("list", "/p", fmt.Errorf("wrapped: %w", fs.ErrNotExist)); got.ErrorType != NotFound {
		t.Error(got)
	}
	if got := From("list", "/p", errors.New("odd")); got.ErrorType != IOError || got.Errno != nil || got.Status() != 500 {
		t.Error(got)
	}
	if !IsTransient(&os.PathError{Err: syscall.EBUSY}) || IsTransient(&os.PathError{Err: syscall.ENOENT}) {
		t.Error("transient")
	}
}

// TestPhrases pins the verb of every operation the spec lists, so each
// message reads naturally: /v1/file/search searches one file, find is
// the name search.
func TestPhrases(t *testing.T) {
	want := map[string]string{
		"read": "Failed to read file", "write": "Failed to write file", "replace": "Failed to replace in file",
		"search": "Failed to search file", "find": "Failed to find files", "grep": "Failed to grep files",
		"glob": "Failed to glob files", "list": "Failed to list directory", "stat": "Failed to stat path",
		"mkdir": "Failed to create directory", "copy": "Failed to copy path", "move": "Failed to move path",
		"delete": "Failed to delete path", "upload": "Failed to upload file", "download": "Failed to download file",
		"edit": "Failed to edit file", "tree": "Failed to transfer tree",
	}
	for op, phrase := range want {
		if got := Phrase(op); got != phrase {
			t.Errorf("Phrase(%q) = %q, want %q", op, got, phrase)
		}
	}
	e := From("search", "/f", &fs.PathError{Op: "open", Path: "/f", Err: syscall.ENOENT})
	if e.Message != "Failed to search file: No such file or directory (os error 2)" {
		t.Error(e.Message)
	}
}

func TestNotRegular(t *testing.T) {
	e := From("read", "/p/fifo", &fs.PathError{Op: "open", Path: "/p/fifo", Err: ErrNotRegular})
	b, _ := json.Marshal(e)
	if string(b) != `{"errno":null,"errno_name":null,"error_type":"invalid_target","exception_type":"OSError","message":"Failed to read file: not a regular file","operation":"read","path":"/p/fifo","retryable":false}` || e.Status() != 400 {
		t.Error(string(b))
	}
}

// TestSandboxBusy: a file operation the sandbox had no free thread for
// is busy, retryable, and 503 on /v2 (200 with success false on v1).
func TestSandboxBusy(t *testing.T) {
	e := From("read", "/w/a", fmt.Errorf("wrapped: %w", sandbox.ErrBusy))
	if e.ErrorType != Busy || !e.Retryable || e.Status() != http.StatusServiceUnavailable || !errors.Is(e, sandbox.ErrBusy) {
		t.Errorf("busy: %+v status %d", e, e.Status())
	}
	if s, ok := Failed200(e); !ok || s != http.StatusOK {
		t.Errorf("v1: %d %v", s, ok)
	}
	if e.Message != "Failed to read file: "+sandbox.ErrBusy.Error() {
		t.Errorf("message: %q", e.Message)
	}
}
