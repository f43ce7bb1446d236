package code

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/tracing"
)

// A run's span (aiod.cell) is a child of the span Execute's ctx carries
// (aiod's MCP tool span, for a tool call): Execute makes one only under
// a recording span, with that span's provider, so an untraced run costs
// one context lookup.

// tracerName is the instrumentation scope of the runs' spans.
const tracerName = "github.com/a2c-smcp/a2c-go/aiod/code"

// Attributes of aiod.cell.
const (
	attrLanguage = attribute.Key("aiod.cell.language")
	attrKernel   = attribute.Key("aiod.cell.kernel") // python3 (ipykernel) or node
	attrStatus   = attribute.Key("aiod.cell.status") // ok, error or timeout
	attrCount    = attribute.Key("aiod.cell.execution_count")
	attrSession  = attribute.Key("aiod.session")
)

// executeTraced is Execute with an aiod.cell span below parent. A run
// that times out is outcome timeout; one that fails while ctx has ended
// (the client cancelled or left) cancelled; any other failure error.
func (e *Engine) executeTraced(ctx context.Context, parent trace.Span, req Request) (*Result, error) {
	lang, _ := ParseLanguage(req.Language)
	attrs := []attribute.KeyValue{attrLanguage.String(lang)}
	switch lang {
	case Python:
		attrs = append(attrs, attrKernel.String(KernelName))
	case JavaScript:
		attrs = append(attrs, attrKernel.String("node"))
	}
	ctx, span := parent.TracerProvider().Tracer(tracerName).Start(ctx, tracing.SpanCell, trace.WithAttributes(attrs...))
	res, err := e.execute(ctx, req)
	if err != nil {
		// A fixed phrase: the engine's error may quote the request
		// (a language, a cwd), and spans carry no caller data.
		tracing.End(span, tracing.OutcomeError, 0, "the cell could not run")
		return res, err
	}
	if res.SessionID != nil {
		span.SetAttributes(attrSession.String(*res.SessionID))
	}
	if res.ExecutionCount != nil {
		span.SetAttributes(attrCount.Int(*res.ExecutionCount))
	}
	outcome := tracing.OutcomeOK
	switch {
	case res.Status == StatusOK:
	case res.Status == StatusTimeout:
		outcome = tracing.OutcomeTimeout
	case ctx.Err() != nil:
		outcome = tracing.OutcomeCancelled
	default:
		outcome = tracing.OutcomeError
	}
	span.SetAttributes(attrStatus.String(res.Status))
	tracing.End(span, outcome, 0, "")
	return res, nil
}
