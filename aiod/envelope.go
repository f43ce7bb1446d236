package aiod

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Shorthands for the api package's answers, used by the daemon's own
// routes.
var (
	OK      = api.OK
	Fail    = api.Fail
	Invalid = api.Invalid
)

// limitJSON refuses a JSON body whose declared length is over the limit
// before a handler reads it. /mcp has its own, larger limit
// (mcp.MaxBody, 8 MiB), which it enforces itself.
func limitJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > api.MaxJSONBody && strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") && r.URL.Path != "/mcp" {
			Fail(w, http.StatusRequestEntityTooLarge, "Request body too large", nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// DefaultBodyIdle is how long a request body may make no progress
// before its connection is cut ([Config.BodyIdle]).
const DefaultBodyIdle = 30 * time.Second

// bodyProgress cuts a request body that stalls: every read of the body
// must make progress within idle, or it fails with a timeout and the
// server closes the connection (the body was not read to its end).
// Progress counts, not the total time, so a large upload that keeps
// sending never fails. It is the one guard for every plane; the server's
// ReadHeaderTimeout covers the headers before it.
func bodyProgress(idle time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &progressBody{ReadCloser: r.Body, rc: http.NewResponseController(w), idle: idle}
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

// envelopeErrors turns the mux's own plain-text 404 and 405 answers into
// envelopes.
func envelopeErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&muxErrorWriter{ResponseWriter: w}, r)
	})
}

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

func (m *muxErrorWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

// ReadFrom keeps the connection's sendfile path for downloads.
func (m *muxErrorWriter) ReadFrom(r io.Reader) (int64, error) {
	if m.swallow {
		return io.Copy(io.Discard, r)
	}
	return readFrom(m.ResponseWriter, r)
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// cors opens the API to browser clients, as aiod does: any origin, the
// key sent as a header (never cookies). A preflight (OPTIONS with
// Access-Control-Request-Method) is answered 204 before authentication,
// since browsers send it without the key.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if r.Header.Get("Origin") != "" {
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Access-Control-Expose-Headers", "X-Tt-Logid, ETag, Last-Modified, Content-Range, Content-Disposition, Accept-Ranges")
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
				h.Set("Access-Control-Allow-Headers", req)
			}
			h.Set("Access-Control-Max-Age", "600")
			h.Add("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
