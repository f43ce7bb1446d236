package computer

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// This file is the Computer's share of a tool call's trace (see package
// tracing): a2c.computer.tool_call, whose ids every hop derives from the
// call's Agent and req_id, with a2c.computer.approval (a human's approval
// wait) and "tools/call <tool>" (the MCP client call, whose W3C context
// goes to the MCP server in params._meta) below it. With no
// TracerProvider nothing here runs: toolCall checks for one, and the
// children start only under a recording span.

// tracerName is the instrumentation scope of the Computer's spans.
const tracerName = "github.com/a2c-smcp/a2c-go/computer"

// attrBundleID is the bundle_id of the MCP server a call went to.
const attrBundleID = attribute.Key("a2c.bundle_id")

// startCall starts the Computer's span of req (a2c.computer.tool_call),
// a child of the hub's derived span, in the call's derived trace.
func (c *Computer) startCall(tp trace.TracerProvider, req *smcp.ToolCallReq, bundleID string) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		tracing.AttrReqID.String(req.ReqID),
		tracing.AttrAgent.String(req.Agent),
		tracing.AttrComputer.String(c.opts.Name),
		tracing.AttrTool.String(req.ToolName),
		tracing.AttrOffice.String(c.opts.Office),
	}
	if bundleID != "" {
		attrs = append(attrs, attrBundleID.String(bundleID))
	}
	return tracing.Start(context.Background(), tp.Tracer(tracerName), tracing.HopComputer, req.Agent, req.ReqID,
		tracing.SpanComputerCall, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// child starts a span named name below the recording span of ctx, with
// that span's provider; it returns nil (and ctx) when ctx holds none, so
// that an untraced call does no work.
func child(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	return parent.TracerProvider().Tracer(tracerName).Start(ctx, name, opts...)
}

// startMCP starts the MCP client span of a call of tool (its original
// name) on the server bundleID, below the Computer's span in ctx, and
// returns the params._meta that carries its W3C context (traceparent,
// tracestate: the unprefixed keys MCP reserves for them). Without a
// recording span in ctx it returns ctx, nil and nil.
func startMCP(ctx context.Context, bundleID, tool string) (context.Context, trace.Span, map[string]any) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil, nil
	}
	ctx, span := child(ctx, tracing.SpanMCPCall+" "+tool, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.AttrMCPMethod.String("tools/call"), tracing.AttrToolName.String(tool), attrBundleID.String(bundleID)))
	meta := make(map[string]any, 2)
	tracing.Inject(ctx, meta)
	return ctx, span, meta
}

// endSpan ends span (nil: nothing) with outcome, one of the
// tracing.Outcome* values: anything but ok sets the error status, with
// msg (the outcome itself when empty) then " (error_code N)" as its
// description; code, when not 0, is the A2C error code. msg is the
// Computer's own words, never a tool's or an MCP server's text (which
// may hold anything, secrets included).
func endSpan(span trace.Span, outcome string, code int, msg string) {
	tracing.End(span, outcome, code, msg)
}

// spanOutcome maps a Record's outcome (ok, error, timeout, cancelled,
// refused) to a span's: a refused call is an error.
func spanOutcome(rec string) string {
	switch rec {
	case "ok", "timeout", "cancelled":
		return rec
	}
	return tracing.OutcomeError
}

// attrApproved says whether the human approved the call.
const attrApproved = attribute.Key("a2c.approval.granted")

// endApproval ends the approval span with the answer: approved is ok; a
// refusal or a failed question is an error, a question cut short by the
// Agent's cancel is cancelled, and one whose time ran out is timeout.
func endApproval(ctx context.Context, span trace.Span, ok bool, err error) {
	granted := err == nil && ok
	span.SetAttributes(attrApproved.Bool(granted))
	switch {
	case granted:
		endSpan(span, tracing.OutcomeOK, 0, "")
	case errors.Is(context.Cause(ctx), errCancelled):
		endSpan(span, tracing.OutcomeCancelled, 0, "")
	case ctx.Err() != nil:
		endSpan(span, tracing.OutcomeTimeout, 0, "no answer in time")
	default:
		endSpan(span, tracing.OutcomeError, smcp.CodeToolRequiresConfirmation, "not approved")
	}
}
