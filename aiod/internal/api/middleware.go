package api

import (
	"io"
	"net/http"
	"strings"
	"time"
)

// BodyProgress cuts a request body that stalls: every read of the body
// must make progress within idle, or it fails with a timeout and the
// server closes the connection (the body was not read to its end).
// Progress counts, not the total time, so a large upload that keeps
// sending never fails. The first deadline is set at once: a request
// refused before its body is read (a Host or Origin refused, a 415) is
// answered, and net/http's own read of the unread body must fail too.
// aiod and its computer-use worker wrap their whole surface in it; the
// server's ReadHeaderTimeout covers the headers before it.
func BodyProgress(idle time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			b := &progressBody{ReadCloser: r.Body, rc: http.NewResponseController(w), idle: idle}
			if r.ContentLength != 0 && b.rc.SetReadDeadline(time.Now().Add(idle)) != nil {
				b.ended = true
			}
			r.Body = b
		}
		next.ServeHTTP(w, r)
	})
}

// progressBody moves the connection's read deadline idle past now
// before each read of the body. Invariant: once the body has ended (EOF)
// no deadline is set again. The server clears the deadline when the body
// ends, then keeps reading the connection in the background to notice a
// client that goes away; a deadline set after that (a read past EOF)
// would cancel a long handler, such as a sync command, idle after its
// body was read. After any other error the deadline stays: the server's
// own read of what is left of the body (before it answers) must fail
// too, so that the connection is closed.
type progressBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	idle  time.Duration
	ended bool // EOF seen, or the writer cannot reach the connection (HTTP/2, tests)
}

func (b *progressBody) Read(p []byte) (int, error) {
	if !b.ended && b.rc.SetReadDeadline(time.Now().Add(b.idle)) != nil {
		b.ended = true
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.ended {
		b.ended = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// EnvelopeErrors turns an http.ServeMux's own plain-text 404 and 405
// answers into envelopes ([Fail]), so that every answer of a surface is
// one: a known path with another method is 405 "Method Not Allowed"
// (with the mux's Allow header), an unknown path 404 "Not Found".
func EnvelopeErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&muxErrorWriter{ResponseWriter: w}, r)
	})
}

// muxErrorWriter answers the mux's plain-text 404 or 405 with the
// envelope and swallows the text the mux writes after it.
type muxErrorWriter struct {
	http.ResponseWriter
	swallow bool
}

func (m *muxErrorWriter) WriteHeader(code int) {
	if (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) &&
		strings.HasPrefix(m.Header().Get("Content-Type"), "text/plain") {
		m.swallow = true
		m.Header().Del("X-Content-Type-Options")
		msg := "Not Found"
		if code == http.StatusMethodNotAllowed {
			msg = "Method Not Allowed"
		}
		Fail(m.ResponseWriter, code, msg, nil)
		return
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m *muxErrorWriter) Write(b []byte) (int, error) {
	if m.swallow {
		return len(b), nil
	}
	return m.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (m *muxErrorWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

// ReadFrom keeps the connection's sendfile path for downloads.
func (m *muxErrorWriter) ReadFrom(r io.Reader) (int64, error) {
	if m.swallow {
		return io.Copy(io.Discard, r)
	}
	return readFrom(m.ResponseWriter, r)
}

// StatusWriter notes the status a handler answers, for the request
// metrics; it stays transparent to http.ResponseController (Unwrap:
// flushing, deadlines, hijacking for WebSockets) and to sendfile
// (ReadFrom).
type StatusWriter struct {
	http.ResponseWriter
	// Status is the status written, 200 until WriteHeader is called.
	Status int
}

// NewStatusWriter wraps w; its Status starts at 200.
func NewStatusWriter(w http.ResponseWriter) *StatusWriter {
	return &StatusWriter{ResponseWriter: w, Status: http.StatusOK}
}

// WriteHeader notes code and writes it.
func (s *StatusWriter) WriteHeader(code int) { s.Status = code; s.ResponseWriter.WriteHeader(code) }

// Unwrap is the wrapped writer, for http.ResponseController.
func (s *StatusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// ReadFrom keeps the connection's sendfile path for downloads.
func (s *StatusWriter) ReadFrom(r io.Reader) (int64, error) { return readFrom(s.ResponseWriter, r) }

// readFrom copies r into w through w's own ReadFrom when it has one.
func readFrom(w http.ResponseWriter, r io.Reader) (int64, error) {
	if rf, ok := w.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{w}, r)
}
