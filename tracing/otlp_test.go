package tracing

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// otlpSample is an export of four spans of which two are valid.
func otlpSample() *coltracepb.ExportTraceServiceRequest {
	tid := mustHex("fd1aa81b9a1f01aab4c2ed728fdd1c4a")
	start := uint64(time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC).UnixNano())
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("host.name", "h"), str("service.name", "a2c-computer")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
			{
				TraceId: tid, SpanId: mustHex("42b0c50a514be493"), ParentSpanId: mustHex("3267a9d79fdacd8c"),
				Name: SpanComputerCall, StartTimeUnixNano: start, EndTimeUnixNano: start + 2_500_000,
				Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "timeout"},
				Attributes: []*commonpb.KeyValue{
					str("a2c.tool", "b__t"),
					{Key: "a2c.error_code", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 408}}},
					{Key: "ok", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}},
					{Key: "nan", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: math.NaN()}}},
					{Key: "list", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{
						Values: []*commonpb.AnyValue{{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}}, {}}}}}},
					{Key: "empty"},
				},
			},
			{TraceId: tid, SpanId: mustHex("0000000000000001"), ParentSpanId: []byte{1, 2}, Name: "odd parent",
				StartTimeUnixNano: start, EndTimeUnixNano: start - 1},
			{TraceId: tid[:15], SpanId: mustHex("0000000000000002"), Name: "short trace id"},
			{TraceId: make([]byte, 16), SpanId: mustHex("0000000000000003"), Name: "zero trace id"},
		}}},
	}}}
}

func TestFromOTLP(t *testing.T) {
	spans := fromOTLP(otlpSample())
	if len(spans) != 2 {
		t.Fatalf("spans = %+v", spans)
	}
	got, _ := json.Marshal(spans[0])
	want := `{"trace_id":"fd1aa81b9a1f01aab4c2ed728fdd1c4a","name":"a2c.computer.tool_call","span_id":"42b0c50a514be493",` +
		`"parent_id":"3267a9d79fdacd8c","start":"2026-01-02T03:04:05.123456789Z","duration_ms":2.5,"service":"a2c-computer",` +
		`"status":"error","status_message":"timeout","attributes":{"a2c.error_code":408,"a2c.tool":"b__t","list":[1.5],"nan":"NaN","ok":true}}`
	if string(got) != want {
		t.Errorf("span =\n%s\nwant\n%s", got, want)
	}
	if s := spans[1]; s.ParentID != "" || s.DurationMS != 0 || s.Status != "ok" || s.Name != "odd parent" {
		t.Errorf("second span = %+v", s)
	}
	if fromOTLP(nil) != nil || fromOTLP(&coltracepb.ExportTraceServiceRequest{}) != nil {
		t.Error("an empty request has spans")
	}
}

func TestDecodeOTLP(t *testing.T) {
	body, err := proto.Marshal(otlpSample())
	if err != nil {
		t.Fatal(err)
	}
	spans, err := DecodeOTLP(body)
	if err != nil || len(spans) != 2 {
		t.Fatalf("DecodeOTLP = %+v, %v", spans, err)
	}
	if _, err := DecodeOTLP([]byte("{\"resourceSpans\":[]}")); err == nil {
		t.Error("JSON decoded as protobuf")
	}
	// Bounds: a long name, many attributes, deep nesting.
	deep := &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "leaf"}}
	for range 10 {
		deep = &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{deep}}}}
	}
	attrs := []*commonpb.KeyValue{{Key: "deep", Value: deep}}
	for i := range 300 {
		attrs = append(attrs, str(strings.Repeat("k", i+1), "v"))
	}
	big := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
		TraceId: mustHex("fd1aa81b9a1f01aab4c2ed728fdd1c4a"), SpanId: mustHex("42b0c50a514be493"),
		Name: strings.Repeat("n", 5000), Attributes: attrs, StartTimeUnixNano: math.MaxUint64,
	}}}}}}}
	spans = fromOTLP(big)
	if len(spans) != 1 || len(spans[0].Name) != maxAttrString+len("…") || len(spans[0].Attributes) != maxSpanAttrs {
		t.Fatalf("bounded span: name %d bytes, %d attributes", len(spans[0].Name), len(spans[0].Attributes))
	}
	depth := 0
	for v := spans[0].Attributes["deep"]; ; depth++ {
		l, ok := v.([]any)
		if !ok || len(l) == 0 {
			break
		}
		v = l[0]
	}
	if depth != maxOTLPDepth {
		t.Errorf("nesting kept = %d, want %d", depth, maxOTLPDepth)
	}
	if _, err := json.Marshal(spans); err != nil {
		t.Error(err)
	}
}

// FuzzDecodeOTLP: any body decodes to spans with valid ids that encode
// as JSON, or to an error; never a panic.
func FuzzDecodeOTLP(f *testing.F) {
	body, _ := proto.Marshal(otlpSample())
	f.Add(body)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		spans, err := DecodeOTLP(b)
		if err != nil {
			return
		}
		for _, s := range spans {
			if len(s.TraceID) != 32 || len(s.SpanID) != 16 || (s.ParentID != "" && len(s.ParentID) != 16) || s.DurationMS < 0 {
				t.Fatalf("span %+v", s)
			}
			if len(s.Attributes) > maxSpanAttrs {
				t.Fatalf("%d attributes", len(s.Attributes))
			}
		}
		if _, err := json.Marshal(spans); err != nil {
			t.Fatal(err)
		}
	})
}

// fromOTLP converts the spans of an OTLP trace export as DecodeOTLP does
// its body.
func fromOTLP(req *coltracepb.ExportTraceServiceRequest) []Span {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil
	}
	spans, _ := DecodeOTLP(b)
	return spans
}
