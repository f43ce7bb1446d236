package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
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

// parseFast reads r (its body already read into body) as a plainly valid
// 2026-07-28 tools/call, or reports false.
func parseFast(r *http.Request, body []byte) (fastRequest, bool) {
	var fr fastRequest
	h := r.Header
	if h.Get("Mcp-Protocol-Version") != nextRevision || h.Get("Mcp-Method") != "tools/call" {
		return fr, false
	}
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "application/json" {
		return fr, false
	}
	if !acceptsBoth(h.Values("Accept")) {
		return fr, false
	}
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
	if json.Unmarshal(params["name"], &fr.name) != nil || fr.name == "" || h.Get("Mcp-Name") != fr.name {
		return fr, false
	}
	if a := params["arguments"]; len(a) > 0 {
		if a[0] != '{' {
			return fr, false
		}
		fr.args = a
	}
	if json.Unmarshal(params["_meta"], &fr.meta) != nil || string(fr.meta[sdk.MetaKeyProtocolVersion]) != `"`+nextRevision+`"` {
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
		var info struct {
			Name    *string `json:"name"`
			Version *string `json:"version"`
		}
		var keys map[string]json.RawMessage
		if json.Unmarshal(ci, &keys) != nil || json.Unmarshal(ci, &info) != nil || info.Name == nil || info.Version == nil ||
			len(keys["name"]) == 0 || len(keys["version"]) == 0 {
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
	if r.Header.Get("Mcp-Method") != "tools/call" || r.Header.Get("Mcp-Protocol-Version") != nextRevision {
		return false // before reading the body: most of the other requests
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false // the SDK reads the same error and answers it
	}
	fr, ok := parseFast(r, body)
	if !ok {
		return false
	}
	if o.stale.Load() || o.refreshing.Load() {
		o.refresh(o.ctx)
	}
	e, ok := o.route(fr.name)
	if !ok {
		return false // the SDK's -32602
	}
	ctx := r.Context()
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
	if code == smcp.CodeToolRequiresConfirmation {
		var caps map[string]json.RawMessage
		_ = json.Unmarshal(fr.meta[sdk.MetaKeyClientCapabilities], &caps)
		if _, can := caps["elicitation"]; can {
			r.Body = io.NopCloser(bytes.NewReader(body))
			return false // the SDK asks (input required), then runs it again
		}
	}
	if res.Meta == nil {
		res.Meta = sdk.Meta{}
	}
	if _, ok := res.Meta[sdk.MetaKeyServerInfo]; !ok {
		res.Meta[sdk.MetaKeyServerInfo] = o.impl
	}
	b, err := json.Marshal(res)
	if err != nil || len(b) < 2 {
		b = []byte(`{"content":[],"isError":true}`)
	}
	var out bytes.Buffer
	out.Grow(len(b) + len(fr.id) + 64)
	out.WriteString(`{"jsonrpc":"2.0","id":`)
	out.Write(fr.id)
	out.WriteString(`,"result":`)
	out.Write(b[:len(b)-1])
	out.WriteString(`,"resultType":"complete"}}`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Bytes())
	o.g.fastServed.Add(1)
	return true
}
