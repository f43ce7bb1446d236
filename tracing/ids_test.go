package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestDerivedIDsVector pins the derivation: another implementation (a
// Python Computer, say) reproduces these from the description in TraceID
// and SpanID (and the README). The values are cut from SHA-256 over the
// length-prefixed (4 bytes, big-endian) parts "a2c-smcp/trace/v2", the
// label ("call", or "span/computer" for the Computer's span), the agent
// and the req_id.
func TestDerivedIDsVector(t *testing.T) {
	const agent, req = "my-agent", "req-1"
	if got := TraceID(agent, req).String(); got != "bec072537ae33063a275f77d64e29685" {
		t.Errorf("TraceID = %s", got)
	}
	for hop, want := range map[Hop]string{
		HopAgent:    "d72f4a26e25e8184",
		HopHub:      "eaca9d6390fb5ef9",
		HopComputer: "77b73e6b9441b034",
	} {
		if got := SpanID(hop, agent, req).String(); got != want {
			t.Errorf("SpanID(%s) = %s, want %s", hop, got, want)
		}
	}
	// Stable, and the parts cannot slide into each other.
	if a, b := TraceID(agent, req), TraceID(agent, string([]byte(req))); a != b {
		t.Error("TraceID is not stable")
	}
	if TraceID("ab", "c") == TraceID("a", "bc") || SpanID(HopHub, "ab", "c") == SpanID(HopHub, "a", "bc") {
		t.Error("length prefixes do not separate the parts")
	}
	if TraceID(agent, req) == TraceID(agent, "req-2") || TraceID(agent, req) == TraceID("other", req) {
		t.Error("different calls share a trace id")
	}
	c := deriveCall(agent, req)
	if c.trace != TraceID(agent, req) || c.agent != SpanID(HopAgent, agent, req) || c.hub != SpanID(HopHub, agent, req) {
		t.Errorf("deriveCall = %+v", c)
	}
}

// testProvider is a provider with the project's id generator whose ended
// spans sr holds.
func testProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(IDGenerator()), sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, sr
}

func TestStartParents(t *testing.T) {
	tp, sr := testProvider(t)
	tr := tp.Tracer("test")
	const agent, req = "a", "r"

	// A span already in the context: the Agent's span is a new root with
	// a link to it.
	outerCtx, outer := tr.Start(context.Background(), "outer")
	actx, as := Start(outerCtx, tr, HopAgent, agent, req, SpanAgentCall)
	_, child := tr.Start(actx, "child")
	child.End()
	as.End()
	outer.End()
	_, hs := Start(context.Background(), tr, HopHub, agent, req, SpanHubRelay)
	hs.End()
	_, cs := Start(context.Background(), tr, HopComputer, agent, req, SpanComputerCall)
	cs.End()

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		byName[s.Name()] = s
	}
	tid := TraceID(agent, req)
	for _, tc := range []struct {
		name   string
		span   trace.SpanID
		parent trace.SpanID
	}{
		{SpanAgentCall, SpanID(HopAgent, agent, req), trace.SpanID{}},
		{SpanHubRelay, SpanID(HopHub, agent, req), SpanID(HopAgent, agent, req)},
		{SpanComputerCall, SpanID(HopComputer, agent, req), SpanID(HopHub, agent, req)},
	} {
		s := byName[tc.name]
		if s == nil {
			t.Fatalf("no span %s", tc.name)
		}
		if s.SpanContext().TraceID() != tid || s.SpanContext().SpanID() != tc.span || s.Parent().SpanID() != tc.parent {
			t.Errorf("%s: trace %s span %s parent %s; want %s %s %s", tc.name, s.SpanContext().TraceID(), s.SpanContext().SpanID(),
				s.Parent().SpanID(), tid, tc.span, tc.parent)
		}
	}
	ag := byName[SpanAgentCall]
	if links := ag.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != outer.SpanContext().SpanID() {
		t.Errorf("agent span links = %+v, want the outer span", links)
	}
	// A span started under a hop's span has its own id, in the same trace.
	c := byName["child"]
	if c.SpanContext().TraceID() != tid || c.Parent().SpanID() != SpanID(HopAgent, agent, req) || c.SpanContext().SpanID() == SpanID(HopAgent, agent, req) {
		t.Errorf("child: trace %s span %s parent %s", c.SpanContext().TraceID(), c.SpanContext().SpanID(), c.Parent().SpanID())
	}
	if o := byName["outer"]; o.SpanContext().TraceID() == tid {
		t.Error("the outer span took the call's trace id")
	}
}

func TestIDGeneratorRandom(t *testing.T) {
	g := IDGenerator()
	seen := map[trace.SpanID]bool{}
	for range 100 {
		tid, sid := g.NewIDs(context.Background())
		if !tid.IsValid() || !sid.IsValid() || seen[sid] {
			t.Fatalf("NewIDs = %s %s", tid, sid)
		}
		seen[sid] = true
		if s2 := g.NewSpanID(context.Background(), tid); !s2.IsValid() || seen[s2] {
			t.Fatalf("NewSpanID = %s", s2)
		}
	}
	// Ids prepared for another trace are not taken.
	ctx := context.WithValue(context.Background(), idsKey{}, ids{trace: TraceID("a", "r"), span: SpanID(HopHub, "a", "r")})
	if tid, sid := g.NewIDs(ctx); tid != TraceID("a", "r") || sid != SpanID(HopHub, "a", "r") {
		t.Errorf("NewIDs with prepared ids = %s %s", tid, sid)
	}
	if sid := g.NewSpanID(ctx, TraceID("a", "r")); sid != SpanID(HopHub, "a", "r") {
		t.Errorf("NewSpanID, same trace = %s", sid)
	}
	if sid := g.NewSpanID(ctx, TraceID("b", "r")); sid == SpanID(HopHub, "a", "r") {
		t.Error("NewSpanID took the ids of another trace")
	}
}
