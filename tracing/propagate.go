package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// w3c is the one propagator: W3C trace context (traceparent, tracestate).
var w3c = propagation.TraceContext{}

// metaCarrier adapts an MCP request's params._meta to the propagator. Only
// string values are read; the keys are the unprefixed ones MCP reserves
// for trace context.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes the span context of ctx into meta (an MCP request's
// params._meta) as traceparent and tracestate. It writes nothing when
// ctx holds no valid span context.
func Inject(ctx context.Context, meta map[string]any) {
	w3c.Inject(ctx, metaCarrier(meta))
}

// Extract returns ctx with the remote span context that meta (an MCP
// request's params._meta) carries, if any: spans started from it are the
// MCP client's children. A malformed traceparent is ignored.
func Extract(ctx context.Context, meta map[string]any) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	return w3c.Extract(ctx, metaCarrier(meta))
}
