package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestInjectExtract(t *testing.T) {
	tp, _ := testProvider(t)
	ctx, s := Start(context.Background(), tp.Tracer("t"), HopComputer, "a", "r", SpanComputerCall)
	defer s.End()
	meta := map[string]any{"progressToken": 7}
	Inject(ctx, meta)
	want := "00-" + TraceID("a", "r").String() + "-" + SpanID(HopComputer, "a", "r").String() + "-01"
	if meta["traceparent"] != want || meta["progressToken"] != 7 {
		t.Fatalf("meta = %v, want traceparent %s", meta, want)
	}
	got := trace.SpanContextFromContext(Extract(context.Background(), meta))
	if !got.IsRemote() || got.TraceID() != TraceID("a", "r") || got.SpanID() != SpanID(HopComputer, "a", "r") || !got.IsSampled() {
		t.Errorf("extracted = %+v", got)
	}

	for name, m := range map[string]map[string]any{
		"nil":        nil,
		"empty":      {},
		"malformed":  {"traceparent": "00-xyz-01"},
		"not string": {"traceparent": 42},
		"zero ids":   {"traceparent": "00-00000000000000000000000000000000-0000000000000000-01"},
	} {
		if sc := trace.SpanContextFromContext(Extract(context.Background(), m)); sc.IsValid() {
			t.Errorf("%s: extracted %+v", name, sc)
		}
	}
	empty := map[string]any{}
	Inject(context.Background(), empty)
	if len(empty) != 0 {
		t.Errorf("no span: injected %v", empty)
	}
}
