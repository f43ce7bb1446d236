package commands

import (
	"context"
	"strconv"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/tracing"
)

// A command's span (aiod.command) is a child of the span its Start's
// ctx carries (aiod's MCP tool span, for a tool call): Start makes one
// only under a recording span, with that span's provider, so an untraced
// command costs one context lookup.

// tracerName is the instrumentation scope of the commands' spans.
const tracerName = "github.com/a2c-smcp/a2c-go/aiod/commands"

// Attributes of aiod.command: OpenTelemetry's process conventions for
// the command line and the exit code, and aiod's own for the rest.
const (
	attrCommandLine = attribute.Key("process.command_line")
	attrExitCode    = attribute.Key("process.exit.code")
	attrSession     = attribute.Key("aiod.session")
	attrStatus      = attribute.Key("aiod.command.status")
)

// maxShown bounds the command line a span carries, in bytes.
const maxShown = 256

// startSpan starts the span of a command of req in session below parent.
func startSpan(ctx context.Context, parent trace.Span, req Request, session string) trace.Span {
	line := req.Shown
	if line == "" {
		line = req.Command
	}
	_, span := parent.TracerProvider().Tracer(tracerName).Start(ctx, tracing.SpanCommand, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrCommandLine.String(cut(line, maxShown)), attrSession.String(session)))
	return span
}

// endSpanFailed ends the span of a command that could not be started.
func endSpanFailed(span trace.Span, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(tracing.AttrOutcome.String(tracing.OutcomeError))
	span.SetStatus(codes.Error, cut(err.Error(), maxShown))
	span.End()
}

// endSpan ends the span of a command that ended with status and code;
// killed says a kill ended it. A hard timeout is outcome timeout, a
// kill cancelled, a non-zero exit error: each with the error status.
func endSpan(span trace.Span, status string, code int, killed bool) {
	outcome, msg := tracing.OutcomeOK, ""
	switch {
	case status == StatusTimedOut:
		outcome, msg = tracing.OutcomeTimeout, "killed at its timeout"
	case killed:
		outcome, msg = tracing.OutcomeCancelled, "killed"
	case code != 0:
		outcome, msg = tracing.OutcomeError, "exit code "+strconv.Itoa(code)
	}
	span.SetAttributes(attrExitCode.Int(code), attrStatus.String(status), tracing.AttrOutcome.String(outcome))
	if outcome != tracing.OutcomeOK {
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}

// cut cuts s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
