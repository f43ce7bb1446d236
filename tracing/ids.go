package tracing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Hop names a hop of a tool call's path whose span id every process can
// derive (see [SpanID]).
type Hop string

// The hops of a tool call, in order: each one's span is the parent of the
// next one's.
const (
	// HopAgent is the Agent's own span of the call: the trace's root.
	HopAgent Hop = "agent"
	// HopHub is the hub's relay of the call (a2c.hub.relay).
	HopHub Hop = "hub"
	// HopComputer is the Computer's handling of the call
	// (a2c.computer.tool_call).
	HopComputer Hop = "computer"
)

// parent is the hop whose span is hop's parent; "" for the root.
func (h Hop) parent() Hop {
	switch h {
	case HopHub:
		return HopAgent
	case HopComputer:
		return HopHub
	}
	return ""
}

// sum hashes the parts with a domain label, each part length-prefixed so
// that no two different (agent, req_id) pairs hash the same input. The
// input is built in a stack buffer when it fits: every relayed call
// derives three ids.
func sum(label string, agent, reqID string) [sha256.Size]byte {
	var stack [256]byte
	in := stack[:0]
	for _, p := range [...]string{"a2c-smcp/trace/v1", label, agent, reqID} {
		in = binary.BigEndian.AppendUint32(in, uint32(len(p)))
		in = append(in, p...)
	}
	return sha256.Sum256(in)
}

// TraceID is the trace id of the tool call reqID of agent: the first 16
// bytes of a SHA-256 over both. Every process derives the same one.
func TraceID(agent, reqID string) trace.TraceID {
	s := sum("trace", agent, reqID)
	var id trace.TraceID
	copy(id[:], s[:16])
	if !id.IsValid() {
		id[15] = 1 // all zero is invalid; 2^-128, but never produce it
	}
	return id
}

// SpanID is the span id of hop's span in the tool call reqID of agent.
func SpanID(hop Hop, agent, reqID string) trace.SpanID {
	s := sum("span/"+string(hop), agent, reqID)
	var id trace.SpanID
	copy(id[:], s[:8])
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// callContext is the span context of hop's span in a call, as the next
// hop sees it: remote, sampled. Start uses it to name a parent.
func callContext(hop Hop, agent, reqID string) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    TraceID(agent, reqID),
		SpanID:     SpanID(hop, agent, reqID),
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
}

// idsKey carries the ids the next span must take (see IDGenerator).
type idsKey struct{}

type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

// Start starts hop's span of the tool call reqID of agent with tr: its
// trace id and span id are the derived ones, and its parent is the
// previous hop's derived span (none for [HopAgent], which starts a new
// root whatever ctx holds; a span already in ctx becomes a link).
//
// The returned context carries the new span, and not the ids: spans
// started from it get ids of their own. The derived ids are taken only
// when tr's provider uses [IDGenerator]; another provider makes random
// ones, and the span is then not the parent the next hop names.
func Start(ctx context.Context, tr trace.Tracer, hop Hop, agent, reqID, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	tid := TraceID(agent, reqID)
	sctx := context.WithValue(ctx, idsKey{}, ids{trace: tid, span: SpanID(hop, agent, reqID)})
	if p := hop.parent(); p != "" {
		sctx = trace.ContextWithRemoteSpanContext(sctx, callContext(p, agent, reqID))
	} else {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
		opts = append(opts, trace.WithNewRoot())
	}
	_, span := tr.Start(sctx, name, opts...)
	return trace.ContextWithSpan(ctx, span), span
}

// IDGenerator returns the id generator every provider of this project
// uses: it gives a span started by [Start] its derived ids, and every
// other span random ones (crypto/rand).
func IDGenerator() sdktrace.IDGenerator { return idGen{} }

type idGen struct{}

func (idGen) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.trace, v.span
	}
	var t trace.TraceID
	for !t.IsValid() {
		_, _ = rand.Read(t[:])
	}
	return t, randomSpanID()
}

func (idGen) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(ids); ok && v.trace == traceID {
		return v.span
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		_, _ = rand.Read(s[:])
	}
	return s
}
