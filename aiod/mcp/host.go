package mcp

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// refuseRebinding is the DNS-rebinding guard. A request that arrived on a
// loopback address (the connection's local address, which net/http puts
// in the request context, so a daemon bound to 0.0.0.0 is guarded for
// its loopback clients too) must name a loopback host: its Host, and its
// Origin when it sends one, must be localhost, an address in 127.0.0.0/8
// or ::1 (any port), or one of [Config.AllowedHosts]. Otherwise a web
// page whose name was re-pointed at 127.0.0.1 could drive the sandbox
// from the user's browser; it is answered 403. A request that arrived on
// any other address is not judged here (its client reached the daemon
// over the network, where the API key is the guard). It reports whether
// it answered.
func (s *Server) refuseRebinding(w http.ResponseWriter, r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !loopbackAddr(local.String()) {
		return false
	}
	what := ""
	if !s.hostAllowed(r.Host) {
		what = "Host " + quote(r.Host)
	} else if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || !s.hostAllowed(u.Host) {
			what = "Origin " + quote(o)
		}
	}
	if what == "" {
		return false
	}
	s.log.Warn("MCP request refused: not a loopback host", "what", what, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusForbidden, response{JSONRPC: "2.0", ID: nullID,
		Error: &rpcError{Code: -32000, Message: "Forbidden: " + what + " is not a loopback host (DNS-rebinding protection)"}})
	return true
}

// hostAllowed reports whether a host[:port] names the loopback interface
// or an allowed host.
func (s *Server) hostAllowed(hostport string) bool {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
	if h == "" {
		return false
	}
	if h == "localhost" {
		return true
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range s.cfg.AllowedHosts {
		if strings.EqualFold(strings.TrimSuffix(a, "."), h) {
			return true
		}
	}
	return false
}

// loopbackAddr reports whether an address (ip:port) is on loopback.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// quote bounds and quotes a header value for a message or a log line.
func quote(v string) string {
	if len(v) > 200 {
		v = v[:200] + "..."
	}
	return `"` + strings.ReplaceAll(v, `"`, `\"`) + `"`
}
