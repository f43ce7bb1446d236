package tracing

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TEMPORARY until h/encode merges.
type otlpSpan struct {
	TraceID    trace.TraceID
	SpanID     trace.SpanID
	ParentID   trace.SpanID
	Remote     bool
	Sampled    bool
	Name       string
	Kind       trace.SpanKind
	Start, End time.Time
	Attrs      []attribute.KeyValue
	Status     codes.Code
	StatusMsg  string
}
