// Package origin owns the one rule by which every listener of the
// project (the hub, its console, aiod) tells a request a web page may
// have sent on its own from one it may answer: the Host and Origin
// check, and the CORS headers that go with it.
//
// # Why
//
// A server on 127.0.0.1 without a token is reachable by any page the
// user's browser opens. No CORS protects a WebSocket handshake or a
// "simple" POST (text/plain, form): the browser sends them and only hides
// the answer. And a page whose own name is re-pointed at 127.0.0.1 (DNS
// rebinding) is, to the browser, same-origin with the server. Both are
// refused here, before any handler runs.
//
// # Host
//
// A request's Host must name this server: localhost, a loopback address
// (127.0.0.0/8, ::1), the host of the address the server listens on, or a
// name given with --allowed-host (any port in every case; a trailing dot
// and letter case are ignored). Listening on every address (0.0.0.0, ::
// or an empty host), any IP literal is accepted: a request that names an
// IP address cannot come from DNS rebinding (the page's origin is then
// that address itself, and the Origin rule below holds), and the
// addresses of the machine's interfaces change under a running server
// (DHCP, containers, port mappings), so a snapshot of them would refuse
// legitimate clients. Names (other than localhost) always need the flag:
// that is the whole rebinding defence. A request with no Host at all
// (HTTP/1.0) is not a browser's and is let through. Anything else is
// [HostRefused]: 421 Misdirected Request.
//
// # Origin
//
// A request without an Origin header (CLIs, SDKs, curl, socket.io-client
// in Node) is not judged by it; python-socketio's WebSocket sends the
// origin of the URL it dials, which is the server's own. One with an Origin must
// come from the server's own origin, or from one given with
// --allowed-origin. The server's own origin is the one the browser itself
// would call same-origin: the Origin's host and port equal the request's
// Host (already checked above), as python-socketio decides by default.
// The scheme is not compared, since behind a proxy that ends TLS the page
// is https while the server sees http; an Origin without a port has the
// scheme's default. A Host without a port matches any port: a browser
// always names a port that is not the scheme's default, so such a Host
// came through a proxy that dropped it (nginx's "proxy_set_header Host
// $host"). "null" (sandboxed frames, file: pages), anything that is not
// http(s)://host[:port], and every other origin are [OriginRefused]: 403
// Forbidden.
//
// # CORS
//
// There is no wildcard. A request whose Origin was given with
// --allowed-origin gets Access-Control-Allow-Origin echoing it (with
// Vary: Origin), and its preflight (OPTIONS with
// Access-Control-Request-Method) is answered 204 with the methods and the
// headers it asked for; none is by default. A preflight from any other
// origin is refused by the Origin rule above.
//
// # Cost
//
// [Policy.Check] runs on every request, Engine.IO polling included: it
// parses Host and Origin in place and allocates nothing on the way to
// [Allowed]. Only a refusal builds a message.
//
// Each server answers a refusal in its own error shape ([Verdict.Status]
// and [Policy.Refusal] give the status and the message); this package
// writes nothing but CORS headers.
package origin
