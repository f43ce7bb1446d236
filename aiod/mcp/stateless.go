package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
// errors (-32601 on 404; -32602, -32020, -32021 and -32022 on 400). A
// call is its POST: it ends when the POST does (the client went away or
// cancelled it), and a notifications/cancelled is acknowledged without
// effect, since an id names no call across clients here. The
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
	codeMissingCapability  = -32021
	codeUnsupportedVersion = -32022
)

// servedNext are the methods the 2026-07-28 path serves.
var servedNext = map[string]bool{"server/discover": true, "tools/list": true, "tools/call": true}

// nextVersions are the revisions the stateless path speaks, and
// allVersions every revision /mcp speaks (server/discover lists them, a
// client of an earlier one then initializes on the other paths).
var (
	nextVersions = []string{statelessProtocol}
	allVersions  = append([]string{statelessProtocol}, protocolVersions...)
)

// isNewRevision reports whether v names the 2026-07-28 revision or a later
// one: a date, not before it ("latest", or any other word, is not).
func isNewRevision(v string) bool {
	if len(v) != len("2006-01-02") || v < statelessProtocol {
		return false
	}
	for i, c := range []byte(v) {
		if i == 4 || i == 7 {
			if c != '-' {
				return false
			}
		} else if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// newEra reports whether a POST without a session speaks 2026-07-28 or
// later: its MCP-Protocol-Version header names such a revision, or its one
// message carries the revision's _meta, or asks for a method that exists
// only there. A batch never does (the revision has none). Every other
// POST keeps the handshake-era plain path, so the clients of the earlier
// revisions see no change.
func newEra(r *http.Request, msgs []message, batch bool) bool {
	if isNewRevision(r.Header.Get("Mcp-Protocol-Version")) {
		return true
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Invalid != nil {
			continue
		}
		if !batch && (m.Method == "server/discover" || m.Method == "subscriptions/listen") {
			return true
		}
		// A batch that holds one is refused there (the revision has
		// none), not run on the plain path. A plain request whose params
		// do not hold the key's text is not decoded here; one that does
		// is decoded once for every reader (paramFields).
		if !bytes.Contains(m.Params, []byte(metaProtocolVersion)) {
			continue
		}
		var meta map[string]json.RawMessage
		var v string
		if json.Unmarshal(m.paramFields()["_meta"], &meta) == nil && json.Unmarshal(meta[metaProtocolVersion], &v) == nil && isNewRevision(v) {
			return true
		}
	}
	return false
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
	p := m.paramFields() // not an object: no fields, refused below
	if code, msg := checkHeaders(r, m, p); code != 0 {
		fail(http.StatusBadRequest, m.ID, code, msg, nil)
		return
	}
	if !m.isCall() {
		// notifications/cancelled included: a call ends with its POST.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if !servedNext[m.Method] {
		// initialize and ping are gone from the revision; a tools-only
		// server has no prompts, resources, logging, completions nor
		// subscriptions/listen.
		fail(http.StatusNotFound, m.ID, codeMethodNotFound, methodNotFound(m.Method).Message, nil)
		return
	}
	if status, code, msg, data := checkMeta(r, p); code != 0 {
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
			CacheScope: "public", SupportedVersions: allVersions,
			Capabilities: map[string]any{"tools": map[string]any{}},
		})}
	default: // tools/list, tools/call
		resp, _ = s.handle(ctx, m, func() json.RawMessage { return s.listJSON(ctx) }, false)
		if resp.Error == nil && m.Method == "tools/list" {
			// The list is the same for every client, and may change when
			// an upstream does: public, and not to be kept.
			resp.Result = withFields(resp.Result, `"resultType":"complete","ttlMs":0,"cacheScope":"public"`)
		} else if resp.Error == nil && !hasTopKey(resp.Result, "resultType") {
			// An upstream's result may carry its own.
			resp.Result = withFields(resp.Result, `"resultType":"complete"`)
		}
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
	case e.Code == codeInvalidParams, e.Code == codeHeaderMismatch, e.Code == codeMissingCapability, e.Code == codeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// accepts reports whether the Accept header lists JSON (application/json
// or application/*) and an event stream (text/event-stream or text/*);
// */* is both.
func accepts(r *http.Request) (jsonOK, streamOK bool) {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// checkHeaders holds the Mcp-Method header (every message) and the
// Mcp-Name header (tools/call and prompts/get: the name; resources/read:
// the uri) to the body: -32020 when one is missing or differs.
func checkHeaders(r *http.Request, m *message, p map[string]json.RawMessage) (int, string) {
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
		field = p["name"]
	case "resources/read":
		field = p["uri"]
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
func checkMeta(r *http.Request, p map[string]json.RawMessage) (status, code int, msg string, data any) {
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(p["_meta"], &meta)
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
	case !decodes[clientCapabilities](meta[metaClientCapabilities]):
		return http.StatusBadRequest, codeInvalidParams, fmt.Sprintf("missing or invalid _meta field %q", metaClientCapabilities), nil
	}
	if raw, ok := meta[metaClientInfo]; ok && !decodes[sdk.Implementation](raw) {
		return http.StatusBadRequest, codeInvalidParams, fmt.Sprintf("invalid _meta field %q", metaClientInfo), nil
	}
	return 0, 0, "", nil
}

// clientCapabilities is the shape of a 2026-07-28 client's capabilities,
// as the Go SDK reads them (roots as an object of its own).
type clientCapabilities struct {
	sdk.ClientCapabilities
	Roots *struct {
		ListChanged bool `json:"listChanged,omitempty"`
	} `json:"roots,omitempty"`
}

// decodes reports whether raw is a JSON object that decodes as a T: the
// fields it has are of the types T gives them.
func decodes[T any](raw json.RawMessage) bool {
	var v T
	return isObject(raw) && json.Unmarshal(raw, &v) == nil
}

// hasTopKey reports whether the JSON object obj has key at its top level.
// Only an object that holds the key's text anywhere is decoded.
func hasTopKey(obj json.RawMessage, key string) bool {
	if !strings.Contains(string(obj), `"`+key+`"`) {
		return false
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(obj, &m)
	_, ok := m[key]
	return ok
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
