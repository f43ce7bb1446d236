package mcp

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// MCP 2026-07-28 (SEP-2575) has no initialize handshake and no session:
// every request carries in params._meta the protocol version
// (io.modelcontextprotocol/protocolVersion), the client's capabilities
// and, optionally, its identity, and a Streamable HTTP POST is the whole
// exchange. /mcp serves it beside the handshake-era revisions, chosen per
// request (newEra), on its own stateless path (serveNext) with the one
// dispatcher of the other paths (handle): the revision's checks (the
// _meta fields, the MCP-Protocol-Version, Mcp-Method and Mcp-Name headers,
// no batches), server/discover, the revision's result fields (resultType;
// ttlMs and cacheScope on a list) and its HTTP statuses for JSON-RPC
// errors (-32601 on 404; -32602, -32020, -32021 and -32022 on 400). The
// answer is JSON (application/json), which the revision lets a server
// send for a single answer. The Go SDK's stateless handler does the same
// at about six times the cost of a plain call (it decodes the body four
// times and builds a session per request), which the revision's "no
// slower" target ruled out; its behaviour is the reference the tests
// hold this path to.

const (
	// metaProtocolVersion, metaClientCapabilities and metaClientInfo
	// are the _meta keys of a 2026-07-28 request.
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"

	// codeHeaderMismatch: an MCP header missing, or not what the body
	// says (SEP-2575). codeUnsupportedVersion: a protocol version the
	// server does not speak.
	codeHeaderMismatch     = -32020
	codeUnsupportedVersion = -32022
)

// nextVersions are the revisions the stateless path speaks.
var nextVersions = []string{statelessProtocol}

// newEra reports whether a POST without a session speaks 2026-07-28 or
// later: its MCP-Protocol-Version header names such a revision, or its one
// message carries the revision's _meta, or asks for a method that exists
// only there. A batch never does (the revision has none). Every other
// POST keeps the handshake-era plain path, so the clients of the earlier
// revisions see no change.
func newEra(r *http.Request, msgs []message, batch bool) bool {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v >= statelessProtocol {
		return true
	}
	if batch || msgs[0].Invalid != nil {
		return false
	}
	switch msgs[0].Method {
	case "server/discover", "subscriptions/listen":
		return true
	}
	_, ok := metaOf(msgs[0].Params)[metaProtocolVersion]
	return ok
}

// metaOf is the _meta object of params, or nil.
func metaOf(params json.RawMessage) map[string]json.RawMessage {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(params) == 0 || json.Unmarshal(params, &p) != nil {
		return nil
	}
	return p.Meta
}

// serveNext answers a 2026-07-28 POST, its body already parsed into msgs.
func (s *Server) serveNext(w http.ResponseWriter, r *http.Request, msgs []message, batch bool) {
	fail := func(status int, id json.RawMessage, code int, msg string, data any) {
		if id == nil {
			id = nullID
		}
		e := &rpcError{Code: code, Message: msg}
		if data != nil {
			e.Data = marshal(data)
		}
		writeJSON(w, status, response{JSONRPC: "2.0", ID: id, Error: e})
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		fail(http.StatusUnsupportedMediaType, nil, codeInvalidRequest, "Content-Type must be application/json", nil)
		return
	}
	if json, stream := accepts(r); !json || !stream {
		fail(http.StatusBadRequest, nil, codeInvalidRequest, "Accept must list both application/json and text/event-stream", nil)
		return
	}
	if batch {
		fail(http.StatusBadRequest, nil, codeInvalidRequest, "JSON-RPC batches are not part of MCP 2026-07-28: send one request per POST", nil)
		return
	}
	m := &msgs[0]
	switch {
	case m.Invalid != nil:
		fail(http.StatusBadRequest, m.ID, m.Invalid.Code, m.Invalid.Message, nil)
		return
	case m.Response:
		w.WriteHeader(http.StatusAccepted) // no server request awaits an answer
		return
	}
	var p nextParams
	_ = json.Unmarshal(m.Params, &p) // not an object: no fields, refused below
	if code, msg := checkHeaders(r, m, &p); code != 0 {
		fail(http.StatusBadRequest, m.ID, code, msg, nil)
		return
	}
	if !m.isCall() {
		if m.Method == "notifications/cancelled" {
			s.cancelPlain(m.Params)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if status, code, msg, data := checkMeta(r, &p); code != 0 {
		fail(status, m.ID, code, msg, data)
		return
	}
	ctx := withOrigin(r.Context(), r)
	if r.Header.Get(HopHeader) != "" {
		ctx = withHop(ctx)
	}
	var resp response
	switch m.Method {
	case "server/discover":
		resp = response{JSONRPC: "2.0", ID: m.ID, Result: marshal(discoverResult{
			ResultType: "complete",
			Meta:       map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "aiod", "version": s.cfg.Version}},
			CacheScope: "public", SupportedVersions: nextVersions,
			Capabilities: map[string]any{"tools": map[string]any{}},
		})}
	case "tools/list", "tools/call":
		resp, _ = s.handle(ctx, m, func() json.RawMessage { return s.listJSON(ctx) })
		if resp.Error == nil && m.Method == "tools/list" {
			// The list is the same for every client, and may change when
			// an upstream does: public, and not to be kept.
			resp.Result = withFields(resp.Result, `"resultType":"complete","ttlMs":0,"cacheScope":"public"`)
		} else if resp.Error == nil {
			resp.Result = withFields(resp.Result, `"resultType":"complete"`)
		}
	default:
		// initialize and ping are gone from the revision; a tools-only
		// server has no prompts, resources, logging, completions nor
		// subscriptions/listen.
		resp = response{JSONRPC: "2.0", ID: m.ID, Error: methodNotFound(m.Method)}
	}
	writeJSON(w, nextStatus(resp.Error), resp)
}

// discoverResult is server/discover's answer, its fields in the order the
// Go SDK writes them.
type discoverResult struct {
	ResultType        string         `json:"resultType"`
	Meta              map[string]any `json:"_meta"`
	TTLMs             int            `json:"ttlMs"`
	CacheScope        string         `json:"cacheScope"`
	SupportedVersions []string       `json:"supportedVersions"`
	Capabilities      map[string]any `json:"capabilities"`
}

// unsupportedVersion is the data of a -32022 refusal.
type unsupportedVersion struct {
	Supported []string `json:"supported"`
	Requested string   `json:"requested"`
}

// nextStatus is the HTTP status of an answer at 2026-07-28: a method not
// found on 404, bad parameters on 400 (SEP-2575), anything else on 200.
func nextStatus(e *rpcError) int {
	switch {
	case e == nil:
		return http.StatusOK
	case e.Code == codeMethodNotFound:
		return http.StatusNotFound
	case e.Code == codeInvalidParams, e.Code == codeHeaderMismatch, e.Code == codeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// accepts reports whether the Accept header lists JSON (application/json,
// application/* or */*) and an event stream.
func accepts(r *http.Request) (jsonOK, streamOK bool) {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch mt {
			case "text/event-stream":
				streamOK = true
			case "application/json", "application/*", "*/*":
				jsonOK = true
			}
		}
	}
	return jsonOK, streamOK
}

// nextParams is what serveNext reads of a request's params, once.
type nextParams struct {
	Name json.RawMessage `json:"name"`
	URI  json.RawMessage `json:"uri"`
	Meta json.RawMessage `json:"_meta"`
}

// checkHeaders holds the Mcp-Method header (every message) and the
// Mcp-Name header (tools/call and prompts/get: the name; resources/read:
// the uri) to the body: -32020 when one is missing or differs.
func checkHeaders(r *http.Request, m *message, p *nextParams) (int, string) {
	hm := r.Header.Get("Mcp-Method")
	switch {
	case hm == "":
		return codeHeaderMismatch, "missing required Mcp-Method header"
	case hm != m.Method:
		return codeHeaderMismatch, fmt.Sprintf("header mismatch: Mcp-Method header value '%s' does not match body value '%s'", hm, m.Method)
	}
	var field json.RawMessage
	switch m.Method {
	case "tools/call", "prompts/get":
		field = p.Name
	case "resources/read":
		field = p.URI
	default:
		return 0, ""
	}
	var want string
	_ = json.Unmarshal(field, &want)
	hn := r.Header.Get("Mcp-Name")
	switch {
	case hn == "":
		return codeHeaderMismatch, fmt.Sprintf("missing required Mcp-Name header for method %q", m.Method)
	case hn != want:
		return codeHeaderMismatch, fmt.Sprintf("header mismatch: Mcp-Name header value '%s' does not match body value '%s'", hn, want)
	}
	return 0, ""
}

// checkMeta holds a request's _meta to the revision: the protocol version
// (the MCP-Protocol-Version header must name it too, and it must be one
// /mcp speaks), the client's capabilities (an object), its identity (an
// object, when given). It returns the HTTP status, the JSON-RPC code, the
// message and the error's data of a refusal; code 0 when all hold.
func checkMeta(r *http.Request, p *nextParams) (status, code int, msg string, data any) {
	// A map, not a struct: encoding/json matches struct fields without
	// regard to case, and these keys are exact.
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(p.Meta, &meta)
	var version string
	if raw, ok := meta[metaProtocolVersion]; ok {
		_ = json.Unmarshal(raw, &version)
	}
	hv := r.Header.Get("Mcp-Protocol-Version")
	switch {
	case hv == "":
		return http.StatusBadRequest, codeHeaderMismatch, fmt.Sprintf("MCP-Protocol-Version header is required for requests carrying %q", metaProtocolVersion), nil
	case version == "":
		return http.StatusBadRequest, codeInvalidParams, fmt.Sprintf("missing or invalid _meta field %q", metaProtocolVersion), nil
	case hv != version:
		return http.StatusBadRequest, codeHeaderMismatch, fmt.Sprintf("MCP-Protocol-Version header %q does not match request %s %q", hv, metaProtocolVersion, version), nil
	case version != statelessProtocol:
		return http.StatusBadRequest, codeUnsupportedVersion, "unsupported protocol version", unsupportedVersion{Supported: nextVersions, Requested: version}
	case !isObject(meta[metaClientCapabilities]):
		return http.StatusBadRequest, codeInvalidParams, fmt.Sprintf("missing or invalid _meta field %q", metaClientCapabilities), nil
	}
	if raw, ok := meta[metaClientInfo]; ok && !isObject(raw) {
		return http.StatusBadRequest, codeInvalidParams, fmt.Sprintf("invalid _meta field %q", metaClientInfo), nil
	}
	return 0, 0, "", nil
}

// withFields adds fields (a run of "name":value pairs) at the start of
// the JSON object obj. obj is one of the dispatcher's results: an object.
func withFields(obj json.RawMessage, fields string) json.RawMessage {
	i := 0
	for i < len(obj) && obj[i] != '{' {
		i++
	}
	if i == len(obj) {
		return obj
	}
	out := make([]byte, 0, len(obj)+len(fields)+1)
	out = append(out, '{')
	out = append(out, fields...)
	rest := strings.TrimSpace(string(obj[i+1:]))
	if !strings.HasPrefix(rest, "}") {
		out = append(out, ',')
	}
	return append(out, obj[i+1:]...)
}
