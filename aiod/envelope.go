package aiod

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/internal/origin"
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

// aiodCORS is what an origin given with --allowed-origin may do: every
// method, and read the headers aiod's clients read.
var aiodCORS = origin.Allow{Methods: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
	Expose: "X-Tt-Logid, ETag, Last-Modified, Content-Range, Content-Disposition, Accept-Ranges"}

// guard applies the Host and Origin rule (package origin) to every
// route, before authentication: a Host the daemon does not answer to
// gets 421, an Origin that is not its own or listed 403, in the
// envelope; nothing runs. /mcp answers its refusals itself, as JSON-RPC
// errors, by the same rule. A listed origin gets its CORS headers and
// its preflight is answered 204 here, since browsers send it without
// the key. There is no wildcard: no other origin gets CORS.
func (d *Daemon) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcp" {
			if v := d.origins.Check(r); v != origin.Allowed {
				msg := d.origins.Refusal(v, r)
				d.log.Warn("request refused", "remote", r.RemoteAddr, "status", v.Status(), "reason", msg)
				Fail(w, v.Status(), msg, nil)
				return
			}
		}
		if d.origins.CORS(w, r, aiodCORS) {
			return
		}
		next.ServeHTTP(w, r)
	})
}
