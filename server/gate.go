package server

import (
	"net/http"
	"strconv"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// gate checks a2c_version before Socket.IO sees a request. It applies to
// every request that opens a new Engine.IO session (no sid): the polling
// handshake and a direct WebSocket upgrade alike, so an incompatible
// client is refused on both with the same bytes. Requests that continue a
// session were checked when it opened.
func (s *Server) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("sid") == "" {
			raw := q.Get(smcp.QueryVersion)
			if e := smcp.CheckVersion(raw, s.cfg.Version); e != nil {
				s.metrics.rejected(rejectReason(raw, e))
				s.log.Info("handshake refused", "remote", r.RemoteAddr, "code", e.Code, "reason", e.Message)
				writeVersionError(w, e)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func rejectReason(raw string, e *smcp.Error) string {
	switch {
	case e.Code == smcp.CodeVersionMismatch:
		return "version_mismatch"
	case raw == "":
		return "version_missing"
	default:
		return "version_invalid"
	}
}

// writeVersionError answers a refused handshake: HTTP 400 with the flat
// ErrorPayload as body, and X-A2C-Error-Code for 4008.
func writeVersionError(w http.ResponseWriter, e *smcp.Error) {
	if e.Code == smcp.CodeVersionMismatch {
		w.Header()[smcp.HeaderErrorCode] = []string{strconv.Itoa(e.Code)} // spelled as the specification spells it
	}
	writeJSONError(w, http.StatusBadRequest, e)
}
