package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// The 2026-07-28 tools/call fast path.
//
// The Go SDK's stateless handler costs several hundred microseconds a
// request, nearly all of it in its JSON decoding (each value it decodes
// allocates a 32 KiB buffer, and a tools/call decodes about twenty), which
// is more than the gateway may add to a call. A tools/call of 2026-07-28
// is answered here instead, without the SDK, when it is plainly valid:
// the fast path holds no rule of the protocol's refusals. Anything it
// does not recognise as plainly valid (a header or _meta the SDK might
// refuse, a tool not listed, input responses, a log level, a batch, a
// body that is not one JSON-RPC object with exact keys) goes to the SDK,
// which answers as the specification says; so does a call its Computer
// refused for want of a confirmation that this client can give (the SDK
// then runs the input-required round trip). The answer it writes is the
// SDK's, byte for byte (TestFastPathSameBytes holds it).

// metaLogLevel is the _meta key of a 2026-07-28 request's log level
// (sdk.MetaKeyLogLevel, deprecated with logging): a request that carries
// it goes to the SDK.
const metaLogLevel = "io.modelcontextprotocol/logLevel"

// fastRequest is what the fast path reads of a request.
type fastRequest struct {
	id   json.RawMessage
	name string
	args json.RawMessage
	meta map[string]json.RawMessage
}

// parseCall reads body as one plainly valid tools/call: a JSON-RPC
// object of exactly jsonrpc "2.0", a plain id (see plainID), method
// tools/call and params, whose params hold a name, arguments (an object)
// and _meta and nothing else, keys exact.
func parseCall(body []byte) (fastRequest, bool) {
	var fr fastRequest
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || len(top) != 4 || string(top["jsonrpc"]) != `"2.0"` || string(top["method"]) != `"tools/call"` {
		return fr, false
	}
	if fr.id = top["id"]; !plainID(fr.id) {
		return fr, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(top["params"], &params) != nil {
		return fr, false
	}
	for k := range params {
		if k != "name" && k != "arguments" && k != "_meta" {
			return fr, false // inputResponses, requestState, task, or a key the SDK reads otherwise
		}
	}
	if json.Unmarshal(params["name"], &fr.name) != nil || fr.name == "" {
		return fr, false
	}
	if a := params["arguments"]; len(a) > 0 {
		if a[0] != '{' {
			return fr, false
		}
		fr.args = a
	}
	if m, ok := params["_meta"]; ok && (json.Unmarshal(m, &fr.meta) != nil || fr.meta == nil) {
		return fr, false
	}
	return fr, true
}

// streamableRequest reports whether r is a POST the SDK's handler takes
// as JSON-RPC (Content-Type application/json) from a client that reads
// both answer forms (see acceptsBoth).
func streamableRequest(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json" && acceptsBoth(r.Header.Values("Accept"))
}

// parseFast reads r (its body already read into body) as a plainly valid
// 2026-07-28 tools/call, or reports false.
func parseFast(r *http.Request, body []byte) (fastRequest, bool) {
	h := r.Header
	if h.Get("Mcp-Protocol-Version") != nextRevision || h.Get("Mcp-Method") != "tools/call" || !streamableRequest(r) {
		return fastRequest{}, false
	}
	fr, ok := parseCall(body)
	if !ok || h.Get("Mcp-Name") != fr.name || string(fr.meta[sdk.MetaKeyProtocolVersion]) != `"`+nextRevision+`"` {
		return fr, false
	}
	if _, ok := fr.meta[metaLogLevel]; ok {
		return fr, false
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(fr.meta[sdk.MetaKeyClientCapabilities], &caps) != nil || caps == nil || len(caps) != 0 && !onlyObjects(caps) {
		return fr, false
	}
	if ci, ok := fr.meta[sdk.MetaKeyClientInfo]; ok {
		// name and version, exact keys, JSON strings (the SDK's
		// Implementation needs both).
		var info map[string]json.RawMessage
		if json.Unmarshal(ci, &info) != nil || !jsonString(info["name"]) || !jsonString(info["version"]) {
			return fr, false
		}
	}
	return fr, true
}

// parseSessionCall reads r as a plainly valid tools/call of a session
// that negotiated version: its MCP-Protocol-Version header names that
// version, and its _meta holds no key of MCP's own (a protocol version,
// a progress token) the SDK would act on.
func parseSessionCall(r *http.Request, body []byte, version string) (fastRequest, bool) {
	if r.Header.Get("Mcp-Protocol-Version") != version || !streamableRequest(r) {
		return fastRequest{}, false
	}
	fr, ok := parseCall(body)
	if !ok {
		return fr, false
	}
	for k := range fr.meta {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") || k == "progressToken" {
			return fr, false
		}
	}
	return fr, true
}

// plainID reports whether a request id is one the SDK writes back as it
// came: an integer of at most 15 digits without a leading zero, or a
// string of at most 128 letters, digits and "-_.:" (anything else, the
// SDK re-encodes: those requests go to it).
func plainID(id json.RawMessage) bool {
	n := len(id)
	switch {
	case n == 0:
		return false
	case id[0] == '"':
		if n < 2 || n > 130 || id[n-1] != '"' {
			return false
		}
		for _, c := range id[1 : n-1] {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
				return false
			}
		}
		return true
	}
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// jsonString reports whether raw is a JSON string.
func jsonString(raw json.RawMessage) bool {
	var v string
	return len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &v) == nil
}

// onlyObjects reports whether every client capability is a JSON object
// (as the SDK types them), so the SDK would take the capabilities.
func onlyObjects(caps map[string]json.RawMessage) bool {
	for _, v := range caps {
		if len(v) == 0 || v[0] != '{' {
			return false
		}
	}
	return true
}

// acceptsBoth reports whether Accept names application/json and
// text/event-stream themselves (a narrower reading than the SDK's, which
// also takes wildcards: those requests go to the SDK).
func acceptsBoth(values []string) bool {
	j, s := false, false
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json":
				j = true
			case "text/event-stream":
				s = true
			}
		}
	}
	return j && s
}

// fast answers a 2026-07-28 tools/call on the fast path and reports true,
// or leaves the request untouched (its body put back) and reports false.
func (o *office) fast(w http.ResponseWriter, r *http.Request) bool {
	if o.g.slowOnly.Load() || r.Header.Get("Mcp-Method") != "tools/call" || r.Header.Get("Mcp-Protocol-Version") != nextRevision {
		return false // before reading the body: most of the other requests
	}
	body, ok := readBody(r)
	if !ok {
		return false
	}
	fr, ok := parseFast(r, body)
	if !ok {
		return false
	}
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(fr.meta[sdk.MetaKeyClientCapabilities], &caps)
	_, canAsk := caps["elicitation"]
	res, done := o.runFast(r.Context(), fr, canAsk)
	if !done {
		r.Body = io.NopCloser(bytes.NewReader(body))
		return false
	}
	if res.Meta == nil {
		res.Meta = sdk.Meta{}
	}
	if _, ok := res.Meta[sdk.MetaKeyServerInfo]; !ok {
		res.Meta[sdk.MetaKeyServerInfo] = o.impl
	}
	b := answer(fr.id, res, `,"resultType":"complete"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	o.g.fastServed.Add(1)
	return true
}

// fastSession answers a tools/call of a handshake-era session on the
// fast path and reports true, or leaves the request untouched (its body
// put back) and reports false. It also hands the session's
// notifications/cancelled to the calls it runs (the SDK, which answers
// the notification, does not know them). The session is the SDK's: it
// must be open and initialized at a version this path writes.
func (o *office) fastSession(w http.ResponseWriter, r *http.Request, sid string) bool {
	if o.g.slowOnly.Load() {
		return false
	}
	body, ok := readBody(r)
	if !ok {
		return false
	}
	if bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
		o.cancelFast(sid, body)
		return false
	}
	if !bytes.Contains(body, []byte(`"tools/call"`)) {
		return false
	}
	ss := o.session(sid)
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || !sessionVersions[ip.ProtocolVersion] {
		return false
	}
	fr, ok := parseSessionCall(r, body, ip.ProtocolVersion)
	if !ok {
		return false
	}
	canAsk := ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
	// In a session a call ends by notifications/cancelled, not by its
	// POST's end (as on the SDK's path), or with the session.
	ctx, untrack := o.track(context.WithoutCancel(r.Context()), sid, string(fr.id))
	defer untrack()
	res, done := o.runFast(ctx, fr, canAsk)
	if !done {
		r.Body = io.NopCloser(bytes.NewReader(body))
		return false
	}
	b := answer(fr.id, res, "")
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Connection", "keep-alive")
	h.Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	var out bytes.Buffer
	out.Grow(len(b) + 24)
	out.WriteString("event: message\ndata: ")
	out.Write(b)
	out.WriteString("\n\n")
	_, _ = w.Write(out.Bytes())
	o.g.fastServed.Add(1)
	return true
}

// sessionVersions are the session revisions the fast path answers.
var sessionVersions = map[string]bool{"2025-11-25": true, "2025-06-18": true, "2025-03-26": true}

// readBody reads a request's body (bounded by the gateway's
// MaxBytesReader) and puts it back for whoever reads it next.
func readBody(r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, err == nil // on an error the SDK reads the same error and answers it
}

// runFast runs a fast path's call: the tool must be listed (else the
// SDK answers -32602). done is false when the SDK must take the request
// over: a call its Computer refused for want of a confirmation this
// client can give (the SDK asks, then runs it again).
func (o *office) runFast(ctx context.Context, fr fastRequest, canAsk bool) (res *sdk.CallToolResult, done bool) {
	e, ok := o.route(fr.name)
	if !ok {
		// Not listed yet: a reading under way may bring it.
		o.freshen()
		e, ok = o.route(fr.name)
	}
	if !ok {
		return nil, false
	}
	if len(fr.meta) > 0 {
		carrier := map[string]any{}
		for _, k := range []string{"traceparent", "tracestate"} {
			var v string
			if json.Unmarshal(fr.meta[k], &v) == nil && v != "" {
				carrier[k] = v
			}
		}
		ctx = tracing.Extract(ctx, carrier)
	}
	res, code := o.call(ctx, e, fr.args, false)
	if code == smcp.CodeToolRequiresConfirmation && canAsk {
		return nil, false
	}
	return res, true
}

// answer is the JSON-RPC answer to id with result res, extra (",key:value"
// members) added to the result.
func answer(id json.RawMessage, res *sdk.CallToolResult, extra string) []byte {
	b, err := json.Marshal(res)
	if err != nil || len(b) < 2 {
		b = []byte(`{"content":[],"isError":true}`)
	}
	var out bytes.Buffer
	out.Grow(len(b) + len(id) + len(extra) + 32)
	out.WriteString(`{"jsonrpc":"2.0","id":`)
	out.Write(id)
	out.WriteString(`,"result":`)
	out.Write(b[:len(b)-1])
	out.WriteString(extra)
	out.WriteString(`}}`)
	return out.Bytes()
}

// cancelFast ends the fast call a session's notifications/cancelled
// names, if any (a notification naming none is the SDK's alone).
func (o *office) cancelFast(sid string, body []byte) {
	var n struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &n) != nil || n.Method != "notifications/cancelled" || !plainID(n.Params.RequestID) {
		return
	}
	o.fastMu.Lock()
	cancel := o.inflight[sid+"\x00"+string(n.Params.RequestID)]
	o.fastMu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// track registers a call of session sid under its request id (for
// notifications/cancelled; "" for a call only the session's end stops)
// and returns its context, which ends with the session (endSession) or
// with untrack.
func (o *office) track(parent context.Context, sid, id string) (ctx context.Context, untrack func()) {
	ctx, cancel := context.WithCancel(parent)
	if id == "" {
		id = "#" + strconv.FormatUint(callSeq.Add(1), 10)
	}
	key := sid + "\x00" + id
	o.fastMu.Lock()
	o.inflight[key] = cancel
	o.fastMu.Unlock()
	return ctx, func() {
		o.fastMu.Lock()
		delete(o.inflight, key)
		o.fastMu.Unlock()
		cancel()
	}
}

// endSession cancels the calls of a session that ends (DELETE, idle).
func (o *office) endSession(sid string) {
	o.fastMu.Lock()
	defer o.fastMu.Unlock()
	for k, cancel := range o.inflight {
		if strings.HasPrefix(k, sid+"\x00") {
			cancel()
		}
	}
}

// session is the office's open session of that id, or nil.
func (o *office) session(sid string) *sdk.ServerSession {
	for ss := range o.srv.Sessions() {
		if ss.ID() == sid {
			return ss
		}
	}
	return nil
}
