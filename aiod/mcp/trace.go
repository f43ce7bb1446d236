package mcp

import (
	"context"
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/tracing"
)

// With [Config.TracerProvider] set, every tools/call, whatever path it
// came by, gets an aiod.tool span: a child of the W3C trace context its
// params._meta carries (traceparent, tracestate, as a tracing MCP client
// such as the Computer sends them; a root without one). The engines see
// the span in the tool's ctx and put aiod.command and aiod.cell below it.

// tracerName is the instrumentation scope of the endpoint's spans.
const tracerName = "github.com/a2c-smcp/a2c-go/aiod/mcp"

// startTool starts the span of a call of the tool name.
func (s *Server) startTool(ctx context.Context, name string) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, tracing.SpanSandboxTool, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.AttrMCPMethod.String("tools/call"), tracing.AttrToolName.String(name)))
}

// endTool ends the span of a call with its answer: a JSON-RPC error or a
// result with isError is an error, a call whose ctx ended (the client
// cancelled or left) cancelled.
func endTool(ctx context.Context, span trace.Span, raw json.RawMessage, perr *rpcError) {
	outcome, msg := tracing.OutcomeOK, ""
	switch {
	case perr != nil:
		// The JSON-RPC code only: an error's message may quote the
		// arguments, and spans carry no caller data.
		outcome, msg = tracing.OutcomeError, fmt.Sprintf("error (jsonrpc code %d)", perr.Code)
	case ctx.Err() != nil:
		outcome, msg = tracing.OutcomeCancelled, "cancelled"
	default:
		var head struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(raw, &head) == nil && head.IsError {
			outcome, msg = tracing.OutcomeError, "the tool failed"
		}
	}
	tracing.End(span, outcome, 0, msg)
}
