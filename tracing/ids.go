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

// The derivation of a call's ids, version 2. Each id is cut from a
// SHA-256 over four parts, each preceded by its length as 4 big-endian
// bytes: idsVersion, a label, the Agent's name and the req_id. With the
// label "call" the one hash gives the trace id (bytes 0 to 15), the
// Agent's span id (16 to 23) and the hub's (24 to 31): the hub, which
// derives all three for every call it relays, hashes once. The
// Computer's span id is the first 8 bytes of the hash with the label
// "span/computer". (Version 1 hashed once per id.)
const idsVersion = "a2c-smcp/trace/v2"

// The labels of the two hashes.
const (
	labelCall     = "call"
	labelComputer = "span/computer"
)

// sum hashes the parts with a domain label, each part length-prefixed so
// that no two different (agent, req_id) pairs hash the same input. The
// input is built in a stack buffer when it fits.
func sum(label string, agent, reqID string) [sha256.Size]byte {
	var stack [256]byte
	in := stack[:0]
	for _, p := range [...]string{idsVersion, label, agent, reqID} {
		in = binary.BigEndian.AppendUint32(in, uint32(len(p)))
		in = append(in, p...)
	}
	return sha256.Sum256(in)
}

// callIDs are the ids one hash gives (see idsVersion): the trace id and
// the span ids of the Agent's and the hub's hops.
type callIDs struct {
	trace      trace.TraceID
	agent, hub trace.SpanID
}

// deriveCall derives the callIDs of the tool call reqID of agent.
func deriveCall(agent, reqID string) callIDs {
	s := sum(labelCall, agent, reqID)
	var c callIDs
	copy(c.trace[:], s[0:16])
	copy(c.agent[:], s[16:24])
	copy(c.hub[:], s[24:32])
	c.trace, c.agent, c.hub = validTrace(c.trace), validSpan(c.agent), validSpan(c.hub)
	return c
}

// span is the derived span id of hop, the Agent's or the hub's (the
// Computer's takes a hash of its own: see computerSpan).
func (c *callIDs) span(hop Hop) trace.SpanID {
	if hop == HopHub {
		return c.hub
	}
	return c.agent
}

// validTrace and validSpan make an all-zero id (invalid in OpenTelemetry)
// valid: its last byte becomes 1. A hash gives all zero with a
// probability of 2^-128 or 2^-64, but an id must never be invalid.
func validTrace(id trace.TraceID) trace.TraceID {
	if !id.IsValid() {
		id[15] = 1
	}
	return id
}

func validSpan(id trace.SpanID) trace.SpanID {
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// TraceID is the trace id of the tool call reqID of agent (see
// idsVersion). Every process derives the same one.
func TraceID(agent, reqID string) trace.TraceID {
	return deriveCall(agent, reqID).trace
}

// SpanID is the span id of hop's span in the tool call reqID of agent
// (see idsVersion).
func SpanID(hop Hop, agent, reqID string) trace.SpanID {
	if hop == HopComputer {
		return computerSpan(agent, reqID)
	}
	c := deriveCall(agent, reqID)
	return c.span(hop)
}

// computerSpan is the Computer's span id in the tool call reqID of agent,
// from a hash of its own.
func computerSpan(agent, reqID string) trace.SpanID {
	s := sum(labelComputer, agent, reqID)
	var id trace.SpanID
	copy(id[:], s[:8])
	return validSpan(id)
}

// remoteParent is the span context of a derived parent span: remote,
// sampled.
func remoteParent(tid trace.TraceID, sid trace.SpanID) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    tid,
		SpanID:     sid,
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
	c := deriveCall(agent, reqID)
	own := c.span(hop)
	if hop == HopComputer {
		own = computerSpan(agent, reqID)
	}
	sctx := context.WithValue(ctx, idsKey{}, ids{trace: c.trace, span: own})
	if p := hop.parent(); p != "" {
		sctx = trace.ContextWithRemoteSpanContext(sctx, remoteParent(c.trace, c.span(p)))
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
