package aiod

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// TestTraceSandboxCall: with one provider shared by the hub, the sandbox
// Computer and the daemon (as in a2c up), a tool call of the sandbox
// makes one trace from the hub's relay down to the command it ran: hub
// → Computer → MCP client call → aiod.tool (through params._meta, over
// the in-memory connection) → aiod.command.
func TestTraceSandboxCall(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(tracing.IDGenerator()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	srv, err := server.New(server.Config{Auth: server.TokenAuth("tok", "x-api-key"), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	d, err := New(pinPorts(t, Config{Workspace: t.TempDir(), TracerProvider: tp}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	a := joined(t, d, OfficeOptions{Server: ts.URL, Office: "o1", Name: "box", Token: "tok", BundleID: "sb"})

	id := agent.NewReqID()
	res, err := a.CallTool(context.Background(), agent.Call{Computer: "box", Tool: "sb__sandbox_execute_bash",
		Params: map[string]any{"cmd": "echo traced"}, Timeout: 10 * time.Second, ReqID: id})
	if err != nil || res.IsError {
		t.Fatalf("call = %+v, %v", res, err)
	}
	tid := tracing.TraceID("agent", id)
	chain := []string{tracing.SpanHubRelay, tracing.SpanComputerCall, "tools/call sandbox_execute_bash", tracing.SpanSandboxTool, tracing.SpanCommand}
	byName := map[string]sdktrace.ReadOnlySpan{}
	// The hub's relay span ends before the answer is written, the
	// others before the Computer answers: all are on record by now.
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == tid {
			byName[s.Name()] = s
		}
	}
	for i, name := range chain {
		s := byName[name]
		if s == nil {
			t.Fatalf("no %s span in the trace; it has %v", name, byName)
		}
		if i > 0 && s.Parent().SpanID() != byName[chain[i-1]].SpanContext().SpanID() {
			t.Errorf("%s's parent is %s, want %s", name, s.Parent().SpanID(), chain[i-1])
		}
	}
	if got := byName[tracing.SpanHubRelay].SpanContext().SpanID(); got != tracing.SpanID(tracing.HopHub, "agent", id) {
		t.Errorf("hub span id %s, want the derived one", got)
	}
}
