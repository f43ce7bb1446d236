package transfer

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
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
func (p *Plane) Open(path string) (*Source, error) {
	abs, err := p.resolve("download", path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(abs, os.O_RDONLY|openFlags, 0)
	if err != nil {
		// ENXIO: a socket.
		if fi, serr := os.Stat(abs); errors.Is(err, syscall.ENXIO) && serr == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
			err = fserr.ErrNotRegular
		}
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

// download serves GET and HEAD on /v2/fs/download and /v1/file/download:
// the raw bytes with Content-Type (by extension), Content-Disposition,
// ETag, Last-Modified and Accept-Ranges; Range, If-Range, If-Match,
// If-None-Match and If-Modified-Since as net/http's ServeContent honours
// them (206, 416 with "bytes */size", 304, 412). A failure is a bare
// status: 404 missing, 400 directory or other non-regular file; so are
// ServeContent's own failures (416 keeps its "Content-Range: bytes
// */size", 412 and a read error's 500 carry nothing). change_policy=abort answers 409 when
// the client's If-Range or If-Match validator names an older state, and
// aborts the connection when the file changes while it streams.
func (p *Plane) download(w http.ResponseWriter, r *http.Request) {
	var q pathQuery
	if !api.Query(w, r, &q) {
		return
	}
	abort := q.ChangePolicy != nil && *q.ChangePolicy == "abort"
	src, err := p.Open(q.Path)
	if err != nil {
		w.WriteHeader(fserr.From("download", q.Path, err).Status())
		return
	}
	defer src.Close()
	if abort && src.stale(r.Header) {
		w.WriteHeader(http.StatusConflict)
		return
	}
	h := w.Header()
	ct := mime.TypeByExtension(filepath.Ext(src.Name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	cd := mime.FormatMediaType("attachment", map[string]string{"filename": src.Name})
	if cd == "" {
		cd = "attachment"
	}
	h.Set("Content-Disposition", cd)
	h.Set("Etag", src.ETag)
	h.Set("Accept-Ranges", "bytes")
	bw := &bareErrors{ResponseWriter: w}
	if !abort {
		// The *os.File reaches the ResponseWriter's ReadFrom: sendfile.
		http.ServeContent(bw, r, src.Name, src.ModTime, src.File)
		return
	}
	g := &pinned{s: src}
	http.ServeContent(bw, r, src.Name, src.ModTime, g)
	if g.changed {
		// The deliberate way to cut a response net/http offers: the
		// client sees the transfer fail rather than end short but clean.
		panic(http.ErrAbortHandler)
	}
}

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
