package transfer

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// Source is a regular file opened for download, with the state it had
// when opened.
type Source struct {
	// File is the open file. Close the Source, not the File.
	File *os.File
	// Name is the file's base name.
	Name string
	// Size and ModTime are the file's at open.
	Size    int64
	ModTime time.Time
	// ETag is the strong validator of that state: inode, size and mtime
	// in nanoseconds, in hex, quoted.
	ETag string

	ino uint64
}

// Open opens path (relative paths resolve against the workspace) for
// download. A directory or another non-regular file is invalid_target.
// Errors are *fserr.Error with operation "download".
func (e *Engine) Open(path string) (*Source, error) {
	abs, err := e.resolve("download", path)
	if err != nil {
		return nil, err
	}
	var f *os.File
	err = e.inView(func() error {
		var err error
		if f, err = os.OpenFile(abs, os.O_RDONLY|openFlags, 0); err != nil {
			// ENXIO: a socket.
			if fi, serr := os.Stat(abs); errors.Is(err, syscall.ENXIO) && serr == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
				err = fserr.ErrNotRegular
			}
		}
		return err
	})
	if err != nil {
		return nil, fserr.From("download", path, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fserr.Errno("download", path, syscall.EISDIR)
		if !fi.IsDir() {
			err = fserr.ErrNotRegular
		}
	}
	if err != nil {
		f.Close()
		return nil, fserr.From("download", path, err)
	}
	s := &Source{File: f, Name: fi.Name(), Size: fi.Size(), ModTime: fi.ModTime(), ino: inode(fi)}
	s.ETag = fmt.Sprintf(`"%x-%x-%x"`, s.ino, s.Size, s.ModTime.UnixNano())
	return s, nil
}

// Changed reports whether the open file's inode, size or mtime differ
// from their values at open.
func (s *Source) Changed() (bool, error) {
	fi, err := s.File.Stat()
	if err != nil {
		return false, fmt.Errorf("transfer: stat %s: %w", s.Name, err)
	}
	return inode(fi) != s.ino || fi.Size() != s.Size || !fi.ModTime().Equal(s.ModTime), nil
}

// Close closes the file.
func (s *Source) Close() error { return s.File.Close() }

// stale reports whether the validators a client sent (If-Match, If-Range)
// name another state of the file than the one opened.
func (s *Source) stale(h http.Header) bool {
	if v := h.Get("If-Match"); v != "" && strings.TrimSpace(v) != "*" {
		match := false
		for _, tag := range strings.Split(v, ",") {
			match = match || strings.TrimSpace(tag) == s.ETag
		}
		if !match {
			return true
		}
	}
	v := strings.TrimSpace(h.Get("If-Range"))
	switch {
	case v == "":
		return false
	case strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "W/"):
		return v != s.ETag
	}
	t, err := http.ParseTime(v)
	return err != nil || t.Unix() != s.ModTime.Unix()
}

// ErrChanged is the error reading a pinned download fails with once the
// file changed under it.
var ErrChanged = errors.New("file changed during download")

// pinned reads a Source and fails with ErrChanged once the file has
// changed since it was opened; the check follows every read, so no byte
// read after a change is delivered.
type pinned struct {
	s       *Source
	changed bool
}

func (g *pinned) Read(b []byte) (int, error) {
	n, err := g.s.File.Read(b)
	if ch, serr := g.s.Changed(); ch || serr != nil {
		g.changed = true
		return 0, ErrChanged
	}
	return n, err
}

func (g *pinned) Seek(off int64, whence int) (int64, error) { return g.s.File.Seek(off, whence) }

// bareErrors is the ResponseWriter ServeContent answers through: an error
// status (416 for a range that cannot be served, 412, 500) goes out as a
// bare status, like every other download failure, without the text/plain
// body http.Error would add or the attachment headers set for the file;
// headers such as Content-Range: bytes */size stay. Successful answers
// pass through, ReadFrom (sendfile) included.
type bareErrors struct {
	http.ResponseWriter
	bare bool
}

func (b *bareErrors) WriteHeader(code int) {
	if code >= 400 {
		b.bare = true
		h := b.Header()
		for _, k := range []string{"Content-Type", "Content-Disposition", "Content-Length", "X-Content-Type-Options"} {
			h.Del(k)
		}
	}
	b.ResponseWriter.WriteHeader(code)
}

func (b *bareErrors) Write(p []byte) (int, error) {
	if b.bare {
		return len(p), nil
	}
	return b.ResponseWriter.Write(p)
}

// ReadFrom keeps the underlying writer's ReadFrom (sendfile) reachable.
func (b *bareErrors) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := b.ResponseWriter.(io.ReaderFrom); ok && !b.bare {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{b}, r)
}

// Unwrap lets http.ResponseController reach the connection.
func (b *bareErrors) Unwrap() http.ResponseWriter { return b.ResponseWriter }
