package origin

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// Config is what a server knows of the names it answers to.
type Config struct {
	// Listen is the address the server listens on (host:port, or a bare
	// host). Its host joins the allowed hosts; an unspecified one
	// (0.0.0.0, ::, empty) allows every IP literal (see the package doc).
	// Empty: the loopback names and Hosts only.
	Listen string
	// Hosts are the names given with --allowed-host (see [ParseHost]).
	Hosts []string
	// Origins are the origins given with --allowed-origin (see
	// [ParseOrigin]): the only ones that get CORS headers.
	Origins []string
}

// Policy is the Host and Origin rule of one server, built once by [New]
// and read by every request; it is safe for concurrent use.
type Policy struct {
	anyIP   bool       // listening on every address: any IP literal is a Host
	listen  netip.Addr // the one address listened on, if any
	names   []string   // allowed host names, lower case, no trailing dot
	origins []listed   // --allowed-origin
}

// listed is one --allowed-origin, its port made explicit.
type listed struct {
	https      bool
	host, port string
	text       string // as echoed in Access-Control-Allow-Origin
}

// Verdict is what [Policy.Check] decided.
type Verdict uint8

const (
	// Allowed: the request may run.
	Allowed Verdict = iota
	// HostRefused: the Host names no one this server answers to (421).
	HostRefused
	// OriginRefused: the Origin is neither the server's own nor listed
	// (403).
	OriginRefused
)

// Status is the HTTP status a refusal is answered with: 421 Misdirected
// Request for a Host, 403 Forbidden for an Origin, 200 for [Allowed].
func (v Verdict) Status() int {
	switch v {
	case HostRefused:
		return http.StatusMisdirectedRequest
	case OriginRefused:
		return http.StatusForbidden
	}
	return http.StatusOK
}

// New builds the policy of c, refusing a Listen, host or origin that does
// not parse.
func New(c Config) (*Policy, error) {
	p := &Policy{}
	host := c.Listen
	if h, _, err := net.SplitHostPort(c.Listen); err == nil {
		host = h
	}
	if host == "" {
		p.anyIP = true
	} else if ip, err := netip.ParseAddr(host); err == nil {
		p.anyIP = ip.IsUnspecified()
		p.listen = ip.Unmap()
	} else {
		n, err := ParseHost(host)
		if err != nil {
			return nil, fmt.Errorf("listen address: %w", err)
		}
		p.names = append(p.names, n)
	}
	for _, h := range c.Hosts {
		n, err := ParseHost(h)
		if err != nil {
			return nil, err
		}
		p.names = append(p.names, n)
	}
	for _, o := range c.Origins {
		text, err := ParseOrigin(o)
		if err != nil {
			return nil, err
		}
		https, auth, _ := splitOrigin(text)
		h, port, _, _ := splitHost(auth)
		p.origins = append(p.origins, listed{https: https, host: h, port: withDefault(port, https), text: text})
	}
	return p, nil
}

// Loopback is the policy of a server that knows no more than that it
// listens on loopback: the loopback names only, no CORS.
func Loopback() *Policy { return &Policy{} }

// ParseHost checks one --allowed-host value: a host name or IP address,
// optionally with a port (ignored: every port of an allowed host is
// allowed). It returns the host in lower case without a trailing dot.
func ParseHost(s string) (string, error) {
	v := strings.TrimSpace(s)
	if v == "" || strings.Contains(v, "://") || strings.ContainsAny(v, "/?#@*") {
		return "", fmt.Errorf("bad allowed host %q: want a host name or address, like sandbox.example or 10.0.0.5", s)
	}
	host, _, bracketed, ok := splitHost(v)
	if !ok && !strings.HasPrefix(v, "[") {
		// a bare IPv6 address, as users write it
		if ip, err := netip.ParseAddr(v); err == nil && ip.Zone() == "" {
			host, ok, bracketed = v, true, true
		}
	}
	if !ok || (bracketed && !isIPv6(host)) {
		return "", fmt.Errorf("bad allowed host %q: want a host name or address, like sandbox.example or 10.0.0.5", s)
	}
	return strings.ToLower(host), nil
}

// ParseOrigin checks one --allowed-origin value: scheme (http or https),
// host and optional port, as a browser sends it in Origin (one trailing
// slash is forgiven). It returns the origin as browsers serialize it:
// lower case, without the scheme's default port.
func ParseOrigin(s string) (string, error) {
	v := strings.TrimSuffix(strings.TrimSpace(s), "/")
	https, auth, ok := splitOrigin(v)
	if !ok {
		return "", fmt.Errorf("bad allowed origin %q: want scheme://host[:port], like https://app.example or http://localhost:3000", s)
	}
	host, port, bracketed, ok := splitHost(auth)
	if !ok || (bracketed && !isIPv6(host)) {
		return "", fmt.Errorf("bad allowed origin %q: want scheme://host[:port], like https://app.example or http://localhost:3000", s)
	}
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	if bracketed {
		host = "[" + host + "]"
	}
	if port == "" || port == withDefault("", https) {
		return scheme + strings.ToLower(host), nil
	}
	return scheme + strings.ToLower(host) + ":" + port, nil
}

// SplitList splits a comma-separated list (an environment variable's
// value), dropping blank items.
func SplitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Check decides whether r may run: its Host (when it has one) must be
// allowed, and its Origin (when it has one) must be the server's own or
// listed. It allocates nothing.
func (p *Policy) Check(r *http.Request) Verdict {
	if r.Host != "" && !p.hostAllowed(r.Host) {
		return HostRefused
	}
	o, ok := r.Header["Origin"]
	if !ok {
		return p.fetchSite(r)
	}
	if len(o) != 1 || !p.originAllowed(r.Host, o[0]) {
		return OriginRefused
	}
	return Allowed
}

// fetchSite judges a request without an Origin by the browser's own
// word of where it comes from. A browser sends no Origin on a plain GET
// from another page (an <img>, a <script>, a fetch in no-cors mode), so
// such a page could still make a side-effecting GET (a red-team pass
// opened terminal sessions through GET /v1/shell/terminal-url until the
// agent's were evicted). Every current browser marks those with
// Sec-Fetch-Site: cross-site, or same-site for a page of the same host
// on another port (a local dev server); a request so marked is refused
// unless it is the user opening a page (a top-level GET navigation: a
// link to the console or the terminal page must keep working). Clients
// that are not browsers send no Sec-Fetch-Site and are not judged.
func (p *Policy) fetchSite(r *http.Request) Verdict {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document" {
			return Allowed
		}
		return OriginRefused
	}
	return Allowed
}

// SourceAllowed reports whether src, an Origin or a Referer (a URL whose
// path, query and fragment are ignored), is an origin r may come from:
// the server's own or a listed one. "null" and anything not http(s) are
// not.
func (p *Policy) SourceAllowed(r *http.Request, src string) bool {
	if i := strings.Index(src, "://"); i >= 0 {
		if j := strings.IndexAny(src[i+3:], "/?#"); j >= 0 {
			src = src[:i+3+j]
		}
	}
	return p.originAllowed(r.Host, src)
}

// Refusal is the message a refused request is answered with: what was
// refused and the flag that would allow it. Only a refusal builds one.
func (p *Policy) Refusal(v Verdict, r *http.Request) string {
	switch v {
	case HostRefused:
		return "Host " + quote(r.Host) + " is not a name this server answers to (DNS-rebinding protection); allow it with --allowed-host"
	case OriginRefused:
		if _, ok := r.Header["Origin"]; !ok {
			return "a request from another site (Sec-Fetch-Site: " + quote(r.Header.Get("Sec-Fetch-Site")) + ") is not allowed (cross-origin request)"
		}
		return "Origin " + quote(strings.Join(r.Header["Origin"], ", ")) + " is not allowed (cross-origin request); allow it with --allowed-origin"
	}
	return ""
}

// Allow is what a server lets a listed origin do, for its CORS answers.
type Allow struct {
	// Methods for Access-Control-Allow-Methods in a preflight's answer.
	Methods string
	// Expose, if set, is Access-Control-Expose-Headers.
	Expose string
}

// CORS adds the CORS headers to the answer of a request from a listed
// origin (--allowed-origin) and answers its preflight (OPTIONS with
// Access-Control-Request-Method) with 204 and the methods and headers it
// asked for. It reports whether it answered. Call it once [Policy.Check]
// allowed r; it does nothing for any other origin (same-origin requests
// need no CORS).
func (p *Policy) CORS(w http.ResponseWriter, r *http.Request, a Allow) bool {
	if len(p.origins) == 0 {
		return false
	}
	o, ok := r.Header["Origin"]
	if !ok || len(o) != 1 {
		return false
	}
	l, ok := p.listed(o[0])
	if !ok {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", l.text)
	h.Add("Vary", "Origin")
	if a.Expose != "" {
		h.Set("Access-Control-Expose-Headers", a.Expose)
	}
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", a.Methods)
	if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
		h.Set("Access-Control-Allow-Headers", req)
	}
	h.Set("Access-Control-Max-Age", "600")
	h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// Handler wraps next in the rule: a request [Policy.Check] refuses is
// answered by refuse (the server's own error shape, with the status and
// message given) and never reaches next; an allowed one gets its CORS
// headers first, and a listed origin's preflight is answered here.
func (p *Policy) Handler(next http.Handler, a Allow, refuse func(w http.ResponseWriter, r *http.Request, status int, msg string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := p.Check(r); v != Allowed {
			refuse(w, r, v.Status(), p.Refusal(v, r))
			return
		}
		if p.CORS(w, r, a) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a Host header names this server.
func (p *Policy) hostAllowed(hostport string) bool {
	host, _, bracketed, ok := splitHost(hostport)
	if !ok {
		return false
	}
	if bracketed || numeric(host) {
		// An IPv6 literal is bracketed in a Host, an IPv4 one is not; a
		// zone never reaches a server. (netip's error allocates: names
		// are not parsed as addresses.)
		ip, err := netip.ParseAddr(host)
		if err != nil || bracketed != ip.Is6() || ip.Zone() != "" {
			return false
		}
		ip = ip.Unmap()
		return ip.IsLoopback() || p.anyIP || ip == p.listen
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	for _, n := range p.names {
		if strings.EqualFold(host, n) {
			return true
		}
	}
	return false
}

// originAllowed reports whether o is the origin of the host the request
// was sent to (the caller checked that Host) or a listed one.
func (p *Policy) originAllowed(reqHost, o string) bool {
	https, auth, ok := splitOrigin(o)
	if !ok {
		return false
	}
	oh, op, ob, ok := splitHost(auth)
	if !ok || (ob && !isIPv6(oh)) {
		return false
	}
	if reqHost != "" {
		// A Host without a port matches the Origin's host on any port: a
		// browser always names a port that is not the scheme's default,
		// so a Host without one came through a proxy that dropped it
		// (nginx's "proxy_set_header Host $host").
		if hh, hp, hb, ok := splitHost(reqHost); ok && hb == ob && strings.EqualFold(oh, hh) && (hp == "" || withDefault(op, https) == hp) {
			return true
		}
	}
	_, ok = p.listed(o)
	return ok
}

// listed finds o among the --allowed-origin values.
func (p *Policy) listed(o string) (listed, bool) {
	if len(p.origins) == 0 {
		return listed{}, false
	}
	https, auth, ok := splitOrigin(o)
	if !ok {
		return listed{}, false
	}
	h, port, _, ok := splitHost(auth)
	if !ok {
		return listed{}, false
	}
	port = withDefault(port, https)
	for _, l := range p.origins {
		if l.https == https && l.port == port && strings.EqualFold(l.host, h) {
			return l, true
		}
	}
	return listed{}, false
}

// splitOrigin splits a serialized origin, scheme://authority, with no
// path, query, fragment or user. Schemes other than http and https (and
// "null") are not origins a server of ours answers.
func splitOrigin(o string) (https bool, auth string, ok bool) {
	switch {
	case len(o) > 7 && strings.EqualFold(o[:7], "http://"):
		auth = o[7:]
	case len(o) > 8 && strings.EqualFold(o[:8], "https://"):
		https, auth = true, o[8:]
	default:
		return false, "", false
	}
	return https, auth, !strings.ContainsAny(auth, "/?#@\\ ")
}

// splitHost splits host[:port] or [v6]:port (a Host header, an origin's
// authority) without allocating. The host comes back without brackets
// and without one trailing dot; bracketed says it had brackets. It is
// not ok when empty, when the port is not 1 to 5 digits (an empty port
// after ':' counts as none), when an unbracketed host holds a colon,
// or when the host holds a character no host name or address has.
func splitHost(hp string) (host, port string, bracketed, ok bool) {
	if hp == "" {
		return "", "", false, false
	}
	rest := ""
	if hp[0] == '[' {
		i := strings.IndexByte(hp, ']')
		if i < 0 {
			return "", "", false, false
		}
		host, rest, bracketed = hp[1:i], hp[i+1:], true
		if rest != "" && rest[0] != ':' {
			return "", "", false, false
		}
	} else if i := strings.IndexByte(hp, ':'); i >= 0 {
		host, rest = hp[:i], hp[i:]
	} else {
		host = hp
	}
	if rest != "" {
		port = rest[1:]
		if len(port) > 5 {
			return "", "", false, false
		}
		for i := 0; i < len(port); i++ {
			if port[i] < '0' || port[i] > '9' {
				return "", "", false, false
			}
		}
	}
	if !bracketed {
		host = strings.TrimSuffix(host, ".")
	}
	if host == "" {
		return "", "", false, false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_':
		case c == ':' && bracketed:
		default:
			return "", "", false, false
		}
	}
	return host, port, bracketed, true
}

// numeric reports whether a host is digits and dots only: an IPv4
// address, or something no name is.
func numeric(host string) bool {
	for i := 0; i < len(host); i++ {
		if c := host[i]; c != '.' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// withDefault is port, or the scheme's default when it is empty.
func withDefault(port string, https bool) string {
	switch {
	case port != "":
		return port
	case https:
		return "443"
	}
	return "80"
}

// isIPv6 reports whether s is an IPv6 address without a zone.
func isIPv6(s string) bool {
	ip, err := netip.ParseAddr(s)
	return err == nil && ip.Is6() && ip.Zone() == ""
}

// quote bounds and quotes a header value for a message or a log line.
func quote(v string) string {
	if len(v) > 200 {
		v = v[:200] + "..."
	}
	return strconv.Quote(v)
}
