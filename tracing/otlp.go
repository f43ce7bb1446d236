package tracing

import (
	"encoding/hex"
	"fmt"
	"math"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Bounds on what an OTLP request may put in a [Recorder]: the input is
// untrusted (any process that holds the hub's token may send it), so
// every string and collection is cut to size rather than refused.
const (
	maxOTLPAttrs = 128 // attributes kept per span
	maxOTLPDepth = 4   // nesting of array and key-value list attributes
	maxOTLPItems = 64  // items kept per array or key-value list attribute
	maxOTLPName  = 256 // bytes of a span name or a service name
)

// DecodeOTLP parses the body of an OTLP/HTTP trace export
// (POST /v1/traces, Content-Type application/x-protobuf: an
// ExportTraceServiceRequest) and returns its spans as [FromOTLP] does. A
// body that is not such a message is an error.
func DecodeOTLP(body []byte) ([]Span, error) {
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("tracing: OTLP request: %w", err)
	}
	return FromOTLP(&req), nil
}

// FromOTLP converts the spans of an OTLP trace export to [Span]s, for a
// [Recorder]: ids in lowercase hex, the service.name of each span's
// resource as its Service, the error status as Status "error". A span
// whose trace id or span id is not a valid one (wrong length, all zero) is
// left out; a parent span id that is not valid makes the span a root. The
// start is UTC; an end before the start counts as a zero duration.
// Strings are cut at the Recorder's bounds, and attributes past
// maxOTLPAttrs per span are left out.
func FromOTLP(req *coltracepb.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = cut(kv.GetValue().GetStringValue(), maxOTLPName)
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				if sp, ok := fromOTLPSpan(s, service); ok {
					out = append(out, sp)
				}
			}
		}
	}
	return out
}

func fromOTLPSpan(s *tracepb.Span, service string) (Span, bool) {
	tid, sid := s.GetTraceId(), s.GetSpanId()
	if len(tid) != 16 || len(sid) != 8 || allZero(tid) || allZero(sid) {
		return Span{}, false
	}
	sp := Span{
		TraceID: hex.EncodeToString(tid),
		SpanID:  hex.EncodeToString(sid),
		Name:    cut(s.GetName(), maxOTLPName),
		Service: service,
		Status:  "ok",
	}
	if p := s.GetParentSpanId(); len(p) == 8 && !allZero(p) {
		sp.ParentID = hex.EncodeToString(p)
	}
	start, end := s.GetStartTimeUnixNano(), s.GetEndTimeUnixNano()
	sp.Start = time.Unix(0, clampNanos(start)).UTC()
	if end > start {
		sp.DurationMS = float64(clampNanos(end-start)) / float64(time.Millisecond)
	}
	if st := s.GetStatus(); st.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		sp.Status, sp.StatusMessage = "error", cut(st.GetMessage(), maxAttrString)
	}
	if attrs := s.GetAttributes(); len(attrs) > 0 {
		sp.Attributes = make(map[string]any, min(len(attrs), maxOTLPAttrs))
		for _, kv := range attrs {
			if len(sp.Attributes) >= maxOTLPAttrs {
				break
			}
			if v, ok := otlpValue(kv.GetValue(), 0); ok {
				sp.Attributes[cut(kv.GetKey(), maxOTLPName)] = v
			}
		}
	}
	return sp, true
}

// otlpValue converts an attribute value; ok is false for an empty one or
// one nested too deep.
func otlpValue(v *commonpb.AnyValue, depth int) (any, bool) {
	if v == nil || depth > maxOTLPDepth {
		return nil, false
	}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return cut(x.StringValue, maxAttrString), true
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue, true
	case *commonpb.AnyValue_IntValue:
		return x.IntValue, true
	case *commonpb.AnyValue_DoubleValue:
		if math.IsNaN(x.DoubleValue) || math.IsInf(x.DoubleValue, 0) {
			return fmt.Sprint(x.DoubleValue), true // JSON has no NaN or Inf
		}
		return x.DoubleValue, true
	case *commonpb.AnyValue_BytesValue:
		return hex.EncodeToString(x.BytesValue[:min(len(x.BytesValue), maxAttrString/2)]), true
	case *commonpb.AnyValue_ArrayValue:
		vals := x.ArrayValue.GetValues()
		out := make([]any, 0, min(len(vals), maxOTLPItems))
		for _, e := range vals {
			if len(out) >= maxOTLPItems {
				break
			}
			if ev, ok := otlpValue(e, depth+1); ok {
				out = append(out, ev)
			}
		}
		return out, true
	case *commonpb.AnyValue_KvlistValue:
		vals := x.KvlistValue.GetValues()
		out := make(map[string]any, min(len(vals), maxOTLPItems))
		for _, kv := range vals {
			if len(out) >= maxOTLPItems {
				break
			}
			if ev, ok := otlpValue(kv.GetValue(), depth+1); ok {
				out[cut(kv.GetKey(), maxOTLPName)] = ev
			}
		}
		return out, true
	}
	return nil, false
}

// cut bounds s to n bytes, marking the cut; the result may end inside a
// UTF-8 sequence, which encoding/json replaces.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// clampNanos converts OTLP's unsigned nanoseconds to time's signed ones.
func clampNanos(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}
