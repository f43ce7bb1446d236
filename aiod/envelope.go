package aiod

import (
	"crypto/rand"
	"encoding/hex"
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
