package aiod

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"strings"

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
// before a handler reads it.
func limitJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > api.MaxJSONBody && strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			Fail(w, http.StatusRequestEntityTooLarge, "Request body too large", nil)
			return
		}
		next.ServeHTTP(w, r)
	})
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
