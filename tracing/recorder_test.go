package tracing

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func hexTrace(n int) string { return fmt.Sprintf("%032x", n) }

func TestRecorderBounds(t *testing.T) {
	r := NewRecorder(2, 3)
	t0 := time.Unix(1000, 0)
	// Out of start order: Trace sorts them.
	r.Add(Span{TraceID: hexTrace(1), SpanID: "b", Start: t0.Add(time.Second)}, Span{TraceID: hexTrace(1), SpanID: "a", Start: t0})
	r.Add(Span{TraceID: hexTrace(1), SpanID: "a", Start: t0}) // already held
	r.Add(Span{TraceID: "not hex", SpanID: "x"}, Span{TraceID: hexTrace(0), SpanID: "zero"})
	for i, id := range []string{"c", "d", "e"} {
		r.Add(Span{TraceID: hexTrace(1), SpanID: id, Start: t0.Add(time.Duration(i+2) * time.Second)})
	}
	id1, _ := trace.TraceIDFromHex(hexTrace(1))
	spans, dropped := r.Trace(id1)
	if len(spans) != 3 || spans[0].SpanID != "a" || spans[1].SpanID != "b" || spans[2].SpanID != "c" || dropped != 2 {
		t.Fatalf("trace 1 = %+v, dropped %d; want a b c, 2 dropped", spans, dropped)
	}
	// A third trace evicts the oldest (the first to arrive).
	r.Add(Span{TraceID: hexTrace(2), SpanID: "f"})
	r.Add(Span{TraceID: hexTrace(3), SpanID: "g"})
	if spans, _ := r.Trace(id1); spans != nil {
		t.Errorf("trace 1 kept past the bound: %+v", spans)
	}
	for _, n := range []int{2, 3} {
		id, _ := trace.TraceIDFromHex(hexTrace(n))
		if spans, _ := r.Trace(id); len(spans) != 1 {
			t.Errorf("trace %d = %+v", n, spans)
		}
	}
	r.Add(Span{TraceID: hexTrace(4), SpanID: "h"})
	id2, _ := trace.TraceIDFromHex(hexTrace(2))
	if spans, _ := r.Trace(id2); spans != nil {
		t.Error("the ring did not move on to the next oldest")
	}
	if d := NewRecorder(0, 0); d.maxTraces != DefaultMaxTraces || d.maxSpans != DefaultMaxSpans {
		t.Errorf("defaults = %d %d", d.maxTraces, d.maxSpans)
	}
}

func TestRecorderOnEnd(t *testing.T) {
	r := NewRecorder(0, 0)
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(IDGenerator()), sdktrace.WithSpanProcessor(r))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("test")
	start := time.Now()
	_, s := Start(context.Background(), tr, HopHub, "a", "r", SpanHubRelay, trace.WithTimestamp(start))
	s.SetAttributes(AttrTool.String("b__t"), AttrErrorCode.Int(408), AttrReqID.String(string(make([]byte, 2000))))
	s.SetStatus(codes.Error, "timeout")
	s.End(trace.WithTimestamp(start.Add(1500 * time.Microsecond)))

	spans, _ := r.Trace(TraceID("a", "r"))
	if len(spans) != 1 {
		t.Fatalf("spans = %+v", spans)
	}
	got := spans[0]
	if got.Name != SpanHubRelay || got.SpanID != SpanID(HopHub, "a", "r").String() || got.ParentID != SpanID(HopAgent, "a", "r").String() ||
		got.TraceID != TraceID("a", "r").String() || got.DurationMS != 1.5 || got.Status != "error" || got.StatusMessage != "timeout" ||
		got.Attributes["a2c.tool"] != "b__t" || got.Attributes["a2c.error_code"] != int64(408) || len(got.Attributes["a2c.req_id"].(string)) != maxAttrString+len("…") {
		t.Errorf("span = %+v", got)
	}
}

func TestRecorderOrder(t *testing.T) {
	r := NewRecorder(0, 0)
	t0 := time.Unix(1000, 0)
	r.Add(Span{TraceID: hexTrace(1), SpanID: "child", Start: t0, DurationMS: 1},
		Span{TraceID: hexTrace(1), SpanID: "late", Start: t0.Add(time.Millisecond)},
		Span{TraceID: hexTrace(1), SpanID: "parent", Start: t0, DurationMS: 2})
	id, _ := trace.TraceIDFromHex(hexTrace(1))
	spans, _ := r.Trace(id)
	if len(spans) != 3 || spans[0].SpanID != "parent" || spans[1].SpanID != "child" || spans[2].SpanID != "late" {
		t.Errorf("order = %+v", spans)
	}
}
