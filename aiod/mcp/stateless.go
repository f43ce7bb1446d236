package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP 2026-07-28 (SEP-2575) has no initialize handshake and no session:
// every request carries in params._meta the protocol version
// (io.modelcontextprotocol/protocolVersion), the client's capabilities
// and, optionally, its identity, and a Streamable HTTP POST is the whole
// exchange. /mcp serves it beside the handshake-era revisions, chosen per
// request (newEra): such a request goes to a second SDK server behind a
// stateless Streamable HTTP handler, which checks the metadata and the
// Mcp-Method and Mcp-Name headers (-32602 and -32020 on HTTP 400),
// answers server/discover, and maps a removed or unknown method to 404
// with -32601. The tools are the same: the same middleware answers
// tools/list and tools/call from the one dispatcher, and adds what the
// revision asks of their results (resultType; ttlMs and cacheScope on a
// list).

// metaProtocolVersion is the _meta key that carries a 2026-07-28
// request's protocol version.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// servedNext are the methods /mcp serves at 2026-07-28: initialize and
// ping are gone from the revision; tools only, so resources, prompts,
// logging, completions and subscriptions/listen are -32601 as the
// capabilities server/discover declares say.
var servedNext = map[string]bool{"server/discover": true, "tools/list": true, "tools/call": true}

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
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(msgs[0].Params) == 0 || json.Unmarshal(msgs[0].Params, &p) != nil {
		return false
	}
	_, ok := p.Meta[metaProtocolVersion]
	return ok
}

// newNextServer makes the SDK server of the 2026-07-28 path and its
// stateless handler.
func (s *Server) newNextServer(opts *sdk.ServerOptions, hopts sdk.StreamableHTTPOptions) {
	o := *opts
	o.SupportedProtocolVersions = []string{statelessProtocol}
	s.sdkNext = sdk.NewServer(&sdk.Implementation{Name: "aiod", Version: s.cfg.Version}, &o)
	s.sdkNext.AddReceivingMiddleware(s.nextMiddleware)
	hopts.Stateless = true
	// The POST is the whole call: a client that goes away, or whose
	// notifications/cancelled ends the tracked context, ends the call.
	hopts.PropagateRequestCancellation = true
	s.streamNext = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdkNext }, &hopts)
}

// serveNext answers a 2026-07-28 POST (its body already read, msgs its
// messages) on the stateless handler. A tools/call is tracked under its
// id as on the plain path, so that a notifications/cancelled POSTed on
// its own (the Go SDK's way to cancel a call) ends it, as does the
// client going away.
func (s *Server) serveNext(w http.ResponseWriter, r *http.Request, body []byte, msgs []message) {
	if len(msgs) == 1 && msgs[0].Invalid == nil {
		switch m := &msgs[0]; {
		case m.isCall() && m.Method == "tools/call":
			ctx, done := s.track(r.Context(), m.ID)
			defer done()
			r = r.WithContext(ctx)
		case !m.isCall() && m.Method == "notifications/cancelled":
			s.cancelPlain(m.Params)
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	markOrigin(r)
	jw := &jsonErrors{ResponseWriter: w}
	s.streamNext.ServeHTTP(jw, r)
	jw.finish()
}

// nextMiddleware is toolsMiddleware for 2026-07-28: the same answers,
// with the revision's result fields, and -32601 for every method but
// those of servedNext.
func (s *Server) nextMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	tools := s.toolsMiddleware(next)
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if !servedNext[method] && !strings.HasPrefix(method, "notifications/") {
			e := methodNotFound(method)
			return nil, &jsonrpc.Error{Code: int64(e.Code), Message: e.Message}
		}
		if method != "tools/list" && method != "tools/call" {
			return next(ctx, method, req) // server/discover, notifications
		}
		res, err := tools(ctx, method, req)
		switch r := res.(type) {
		case *rawList:
			// The list is the same for every client, and may change when
			// an upstream does: public, and not to be kept.
			r.raw = withFields(r.raw, `"resultType":"complete","ttlMs":0,"cacheScope":"public"`)
		case *rawCall:
			r.raw = withFields(r.raw, `"resultType":"complete"`)
		}
		return res, err
	}
}

// withFields adds fields (a run of "name":value pairs) at the start of
// the JSON object obj. obj is one of the dispatcher's results: an object.
func withFields(obj json.RawMessage, fields string) json.RawMessage {
	obj = bytes.TrimSpace(obj)
	if len(obj) < 2 || obj[0] != '{' {
		return obj
	}
	out := make([]byte, 0, len(obj)+len(fields)+1)
	out = append(out, '{')
	out = append(out, fields...)
	if rest := bytes.TrimSpace(obj[1:]); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, obj[1:]...)
}
