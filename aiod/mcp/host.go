package mcp

import (
	"net/http"

	"github.com/a2c-smcp/a2c-go/internal/origin"
)

// refuseRebinding applies the Host and Origin rule ([Config.Origins],
// package origin) to a request, before anything else reads it: a Host
// that names no one the daemon answers to (a page whose name was
// re-pointed at 127.0.0.1) gets 421, an Origin that is neither the
// daemon's own nor listed gets 403, each as a JSON-RPC error (-32000)
// with a null id. It reports whether it answered.
func (s *Server) refuseRebinding(w http.ResponseWriter, r *http.Request) bool {
	v := s.origins.Check(r)
	if v == origin.Allowed {
		return false
	}
	msg := s.origins.Refusal(v, r)
	s.log.Warn("MCP request refused", "reason", msg, "remote", r.RemoteAddr)
	writeJSON(w, v.Status(), response{JSONRPC: "2.0", ID: nullID, Error: &rpcError{Code: -32000, Message: msg}})
	return true
}
