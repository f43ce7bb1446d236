package tracing

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// maxStatusText bounds a span status description's own text.
const maxStatusText = 256

// StatusText is the status description of a span whose call failed: msg
// (the outcome itself when msg is empty), cut to 256 bytes on a rune
// boundary, then " (error_code N)" when code is not 0. msg must be the
// process's own words (a protocol error's message, a fixed phrase), never
// a tool's text or arguments: spans carry no caller data.
func StatusText(outcome string, code int, msg string) string {
	text := msg
	if text == "" {
		text = outcome
	}
	text = Cut(text, maxStatusText)
	if code != 0 {
		text += " (error_code " + strconv.Itoa(code) + ")"
	}
	return text
}

// End ends span (nil: nothing) with a call's outcome, one of the
// Outcome* values: it sets a2c.outcome, a2c.error_code when code is not
// 0, and for any outcome but OutcomeOK the error status with
// [StatusText]. Every hop ends its call span this way.
func End(span trace.Span, outcome string, code int, msg string, opts ...trace.SpanEndOption) {
	if span == nil {
		return
	}
	span.SetAttributes(AttrOutcome.String(outcome))
	if code != 0 {
		span.SetAttributes(AttrErrorCode.Int(code))
	}
	if outcome != OutcomeOK {
		span.SetStatus(codes.Error, StatusText(outcome, code, msg))
	}
	span.End(opts...)
}

// Cut returns s cut to at most n bytes without splitting a rune.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
