package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/tracing"
)

// tool is one built-in tool: what tools/list publishes and the adapter
// that runs it over its engine.
type tool struct {
	name        string
	description string
	schema      json.RawMessage
	run         func(ctx context.Context, args []byte) result
}

// toolDef is a tool as tools/list publishes it.
type toolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// result is a tools/call result in its wire shape: the same bytes on the
// plain path, on streamable HTTP and in memory.
type result struct {
	Content []content `json:"content"`
	IsError bool      `json:"isError"`
}

// content is one item of a result: text, or an image (base64 data).
// MarshalJSON writes each kind with exactly its members: a text item
// always carries text (MCP's TextContent requires it, empty or not; the
// TypeScript SDK's client refuses an item without it), an image item
// data and mimeType.
type content struct {
	Type     string
	Text     string
	Data     string
	MimeType string
}

// MarshalJSON writes the item's wire shape (see [content]).
func (c content) MarshalJSON() ([]byte, error) {
	if c.Type == "text" {
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{c.Type, c.Text})
	}
	return json.Marshal(struct {
		Type     string `json:"type"`
		Data     string `json:"data"`
		MimeType string `json:"mimeType"`
	}{c.Type, c.Data, c.MimeType})
}

func textResult(text string) result { return result{Content: []content{{Type: "text", Text: text}}} }

// failure is a tool that ran and failed: isError with the reason as text.
func failure(text string) result {
	return result{Content: []content{{Type: "text", Text: text}}, IsError: true}
}

// jsonResult is a result whose text is v as JSON (keys of maps sorted,
// as aiod writes them).
func jsonResult(v any, isError bool) result {
	return result{Content: []content{{Type: "text", Text: string(marshal(v))}}, IsError: isError}
}

func imageResult(data []byte, mimeType string) result {
	return result{Content: []content{{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mimeType}}}
}

// listJSON is the tools/list result: the built-ins in their order, then
// each upstream's tools (asked for now, concurrently, each within
// [listTimeout]; one that does not answer is left out), minus names
// already taken.
func (s *Server) listJSON(ctx context.Context) json.RawMessage {
	tools := make([]json.RawMessage, 0, len(s.tools))
	taken := make(map[string]bool, len(s.tools))
	for _, t := range s.tools {
		tools = append(tools, marshal(toolDef{Name: t.name, Description: t.description, InputSchema: t.schema}))
		taken[t.name] = true
	}
	for _, ut := range s.listUpstreams(ctx) {
		if !taken[ut.name] {
			taken[ut.name] = true
			tools = append(tools, ut.raw)
		}
	}
	return marshal(map[string]any{"tools": tools})
}

// call is the one dispatcher of tools/call, for every path: a built-in
// by name, else the upstream whose prefix the name carries (the longest
// one; see [Server.route]), else -32602 "unknown tool: <name>". Everything that
// happens inside a tool is a result (isError for failures); only the
// name is a protocol error.
func (s *Server) call(ctx context.Context, name string, args json.RawMessage) (out json.RawMessage, perr *rpcError) {
	if s.tracer != nil {
		var span trace.Span
		ctx, span = s.startTool(ctx, name)
		defer func() { endTool(ctx, span, out, perr) }()
	}
	start := time.Now()
	if s.cfg.BeforeCall != nil {
		if err := s.cfg.BeforeCall(ctx); err != nil {
			return marshal(failure(err.Error())), nil
		}
	}
	if t, ok := s.byName[name]; ok {
		var res result
		if a, bad := objectArgs(args); bad != "" {
			res = failure(bad)
		} else {
			res = t.run(ctx, a)
		}
		s.metrics.observe(name, outcome(ctx, res.IsError), time.Since(start))
		if res.IsError {
			s.log.Info("MCP tool failed", "tool", name, "duration", time.Since(start))
		}
		return marshal(res), nil
	}
	if u, inner := s.route(name); u != nil {
		if isHop(ctx) {
			s.metrics.observe("upstream:"+u.name, "error", time.Since(start))
			return marshal(failure(fmt.Sprintf("%s is not forwarded: this request came from another aiod (%s), and a forwarded request is answered from the built-in tools only", name, HopHeader))), nil
		}
		// Counted per upstream, not per name: any name under a prefix is
		// forwarded, so names would let a client grow the metric.
		label := "upstream:" + u.name
		if _, bad := objectArgs(args); bad != "" {
			s.metrics.observe(label, "error", time.Since(start))
			return marshal(failure(bad)), nil
		}
		raw, rerr := s.forward(ctx, u, name, inner, args)
		switch {
		case rerr != nil:
			s.metrics.observe(label, "protocol_error", time.Since(start))
		default:
			var head struct {
				IsError bool `json:"isError"`
			}
			_ = json.Unmarshal(raw, &head)
			s.metrics.observe(label, outcome(ctx, head.IsError), time.Since(start))
		}
		return raw, rerr
	}
	s.metrics.observe(unknownToolLabel, "unknown_tool", time.Since(start))
	return nil, &rpcError{Code: codeInvalidParams, Message: "unknown tool: " + name}
}

// objectArgs checks a call's arguments: absent or null reads as {}; any
// other value must be a JSON object.
func objectArgs(args json.RawMessage) (json.RawMessage, string) {
	args = compact(args)
	if len(args) == 0 || string(args) == "null" {
		return json.RawMessage(`{}`), ""
	}
	if args[0] != '{' {
		return nil, "arguments must be a JSON object"
	}
	return args, ""
}

func outcome(ctx context.Context, isError bool) string {
	switch {
	case ctx.Err() != nil:
		return "cancelled"
	case isError:
		return "error"
	}
	return "ok"
}

// rawCall and rawList carry the dispatcher's bytes through the SDK: the
// embedded SDK type makes them results, and MarshalJSON writes the bytes
// as they are, so a session client gets what a plain client gets (an
// upstream's answer unedited included).
type rawCall struct {
	*sdk.CallToolResult
	raw json.RawMessage
}

func (r rawCall) MarshalJSON() ([]byte, error) { return r.raw, nil }

type rawList struct {
	*sdk.ListToolsResult
	raw json.RawMessage
}

func (r rawList) MarshalJSON() ([]byte, error) { return r.raw, nil }

// toolsMiddleware answers tools/list and tools/call on the SDK's sessions
// (streamable HTTP and in memory) from the dispatcher, and a request for
// a method /mcp does not serve ([served]) as the plain path does; the
// rest is the SDK's (initialize, ping, notifications, cancellation).
func (s *Server) toolsMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if ex := req.GetExtra(); ex != nil && ex.Header != nil {
			if ex.Header.Get(HopHeader) != "" {
				ctx = withHop(ctx)
			}
			if r := originFromHeader(ex.Header); r != nil {
				ctx = withOrigin(ctx, r)
			}
		}
		switch method {
		case "tools/list":
			return &rawList{ListToolsResult: &sdk.ListToolsResult{}, raw: s.listJSON(ctx)}, nil
		case "tools/call":
			var name string
			var args json.RawMessage
			if p, ok := req.GetParams().(*sdk.CallToolParamsRaw); ok && p != nil {
				name, args = p.Name, p.Arguments
				if s.tracer != nil {
					ctx = tracing.Extract(ctx, p.Meta)
				}
			}
			raw, rerr := s.call(ctx, name, args)
			if rerr != nil {
				return nil, &jsonrpc.Error{Code: int64(rerr.Code), Message: rerr.Message, Data: rerr.Data}
			}
			return &rawCall{CallToolResult: &sdk.CallToolResult{}, raw: raw}, nil
		}
		if !served[method] && !strings.HasPrefix(method, "notifications/") {
			e := methodNotFound(method)
			return nil, &jsonrpc.Error{Code: int64(e.Code), Message: e.Message}
		}
		return next(ctx, method, req)
	}
}
