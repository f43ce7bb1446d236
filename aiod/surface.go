package aiod

import (
	"net/http"
	"net/url"
	"path"
	"strings"
)

// apiSurface restricts next to the chosen API surface
// ([Config.APISurface], AIO_API_SURFACE, --api-surface):
//
//   - "full" (or ""): every route.
//   - "v2": /v2/*, /mcp, /metrics and the public routes ([publicRoute]:
//     /health, /v1/ping, both OpenAPI documents, /internal/auth). Every
//     other path (all of /v1 but the public ones) answers exactly as a
//     route that does not exist: 404 with the envelope.
//
// A path is judged as the public-route rule judges it: decoded once and
// cleaned, so "/v2/../v1/bash/exec" is /v1/bash/exec. A path the rule
// would not trust (double encoding, a backslash, a semicolon, a control
// character, not absolute) is refused.
func apiSurface(surface string, next http.Handler) http.Handler {
	if surface != SurfaceV2 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inV2Surface(r.URL.EscapedPath()) {
			next.ServeHTTP(w, r)
			return
		}
		// The mux's own answer to an unknown route, which api.EnvelopeErrors
		// (outside this handler) turns into the 404 envelope.
		http.NotFound(w, r)
	})
}

// v2Prefixes are the routes of the v2 surface beside the public ones:
// each by itself or followed by "/".
var v2Prefixes = []string{"/v2", "/mcp", "/metrics"}

// inV2Surface reports whether a request path, as sent on the wire, is
// served on the v2 surface.
func inV2Surface(raw string) bool {
	if publicRoute(raw) {
		return true
	}
	p, ok := cleanRoute(raw)
	if !ok {
		return false
	}
	for _, pre := range v2Prefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// cleanRoute decodes a wire path once and cleans it, as [publicRoute]
// does before it matches; ok is false for a path that rule refuses to
// judge (it does not decode, still holds a percent sign, a backslash, a
// semicolon or a control character, or is not absolute).
func cleanRoute(raw string) (string, bool) {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	p, err := url.PathUnescape(raw)
	if err != nil || !strings.HasPrefix(p, "/") {
		return "", false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == '%' || c == '\\' || c == ';' || c < 0x20 || c == 0x7f {
			return "", false
		}
	}
	return path.Clean(p), true
}
