package files

import (
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// MaxTextBytes is the buffered text limit of read, edit, replace and
// search in one file; download streams any size instead.
const MaxTextBytes = 16 << 20

// tooLarge is the message for a text over MaxTextBytes.
const tooLarge = "file exceeds the 16 MiB buffered text limit"

// FsReadQuery is a read: GET /v2/fs/read's query, and /v1/file/read once
// its `file` is mapped to Path.
type FsReadQuery struct {
	Path string `json:"path" serde:"required"`
	// StartLine and EndLine select lines, 0-based, EndLine exclusive.
	StartLine *uint64 `json:"start_line"`
	EndLine   *uint64 `json:"end_line"`
	Ownership `json:"-"`
}

// FileReadResult is a read's answer.
type FileReadResult struct {
	Content string `json:"content"`
	File    string `json:"file"`
}

// Read returns a UTF-8 text file, whole and verbatim, or the selected line
// range (each line keeps its terminator but the last). A directory is
// EISDIR (invalid_target), a FIFO, socket or device invalid_target "not a
// regular file" (never opened in a way that could block), a file over MaxTextBytes bad_request, invalid
// UTF-8 decode_error.
func (e *Engine) Read(ctx context.Context, req FsReadQuery) (*FileReadResult, *fserr.Error) {
	const op = "read"
	abs, _, ferr := e.prepare(ctx, op, req.Path, req.Ownership)
	if ferr != nil {
		return nil, ferr
	}
	text, ferr := inView(e, op, req.Path, func() (string, *fserr.Error) { return readText(op, req.Path, abs) })
	if ferr != nil {
		return nil, ferr
	}
	if req.StartLine != nil || req.EndLine != nil {
		text = lineRange(text, req.StartLine, req.EndLine)
	}
	return &FileReadResult{Content: text, File: req.Path}, nil
}

// readText reads a whole UTF-8 text file of at most MaxTextBytes; shown is
// the path as the client wrote it. Only regular files are read.
func readText(op, shown, abs string) (string, *fserr.Error) {
	f, fi, err := openContent(abs, os.O_RDONLY, 0, false)
	if err != nil {
		return "", fserr.From(op, shown, err)
	}
	defer f.Close()
	if fi.Size() > MaxTextBytes {
		return "", fserr.WithErrno(op, shown, tooLarge, syscall.EFBIG)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxTextBytes+1))
	if err != nil {
		return "", fserr.From(op, shown, err)
	}
	if len(b) > MaxTextBytes {
		return "", fserr.WithErrno(op, shown, tooLarge, syscall.EFBIG)
	}
	if !utf8.Valid(b) {
		return "", fserr.New(op, shown, fserr.DecodeError, fserr.Phrase(op)+": stream did not contain valid UTF-8")
	}
	return string(b), nil
}

// lineRange keeps lines [start, end) of text (0-based, clamped), each with
// its terminator except the last one kept.
func lineRange(text string, start, end *uint64) string {
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	n := uint64(len(lines))
	s, t := uint64(0), n
	if start != nil {
		s = min(*start, n)
	}
	if end != nil {
		t = min(*end, n)
	}
	if s >= t {
		return ""
	}
	out := strings.Join(lines[s:t], "")
	if strings.HasSuffix(out, "\r\n") {
		return out[:len(out)-2]
	}
	return strings.TrimSuffix(out, "\n")
}
