package tracing

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestStatusText(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes: a cut at 256 lands inside a rune
	tests := []struct {
		outcome string
		code    int
		msg     string
		want    string
	}{
		{OutcomeError, 0, "", "error"},
		{OutcomeTimeout, 0, "", "timeout"},
		{OutcomeError, 4404, "", "error (error_code 4404)"},
		{OutcomeError, 404, "Computer not found", "Computer not found (error_code 404)"},
		{OutcomeCancelled, 0, "killed", "killed"},
		{OutcomeError, 0, long, strings.Repeat("é", 128)},
	}
	for _, tt := range tests {
		if got := StatusText(tt.outcome, tt.code, tt.msg); got != tt.want {
			t.Errorf("StatusText(%q, %d, %.20q) = %.40q, want %.40q", tt.outcome, tt.code, tt.msg, got, tt.want)
		}
	}
}

func TestEnd(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	tr := tp.Tracer("t")
	_, ok := tr.Start(context.Background(), "ok")
	End(ok, OutcomeOK, 0, "ignored")
	_, bad := tr.Start(context.Background(), "bad")
	End(bad, OutcomeTimeout, 4001, "")
	End(nil, OutcomeError, 0, "") // a nil span is nothing
	spans := sr.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended", len(spans))
	}
	if s := spans[0]; s.Status().Code != codes.Unset || attr(s, AttrOutcome) != OutcomeOK || attr(s, AttrErrorCode) != nil {
		t.Errorf("ok span: status %v, attributes %v", s.Status(), s.Attributes())
	}
	if s := spans[1]; s.Status().Code != codes.Error || s.Status().Description != "timeout (error_code 4001)" ||
		attr(s, AttrOutcome) != OutcomeTimeout || attr(s, AttrErrorCode) != int64(4001) {
		t.Errorf("failed span: status %v, attributes %v", s.Status(), s.Attributes())
	}
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) any {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.AsInterface()
		}
	}
	return nil
}
