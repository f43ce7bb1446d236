package mcp

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/tracing"
)

// trFixture is a fixture whose server traces into a span recorder.
func trFixture(t *testing.T) (*fixture, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return newFixture(t, func(c *Config) { c.TracerProvider = tp }), rec
}

// trParent is the MCP client span a tracing client names in _meta.
var trParent = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
	SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	TraceFlags: trace.FlagsSampled,
})

// trMeta is a fresh _meta naming trParent for each request: the Go SDK's
// client adds its own keys to the map it is given (the 2026-07-28
// protocol version, say), which must not leak into the next request.
func trMeta() map[string]any {
	return map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
}

// trSpan returns the one ended span named name in trace tid.
func trSpan(t *testing.T, rec *tracetest.SpanRecorder, tid trace.TraceID, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name && s.SpanContext().TraceID() == tid {
			if found != nil {
				t.Fatalf("two %s spans", name)
			}
			found = s
		}
	}
	if found == nil {
		t.Fatalf("no %s span in trace %s", name, tid)
	}
	return found
}

func trAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestTraceChain: a tools/call whose _meta names a client span gets an
// aiod.tool span below it, and the command it runs an aiod.command span
// below that, on the plain path, over a streamable-HTTP session and in
// memory (the sandbox Computer's way).
func TestTraceChain(t *testing.T) {
	f, rec := trFixture(t)
	for _, path := range []string{"plain", "session", "memory"} {
		t.Run(path, func(t *testing.T) {
			rec.Reset()
			cmd := "API_KEY=" + trSecret + " echo traced " + trSecret + "; exit 3"
			switch path {
			case "plain":
				status, body := post(t, f.url, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
					"params": map[string]any{"name": "sandbox_execute_bash", "arguments": map[string]any{"cmd": cmd}, "_meta": trMeta()}})
				if status != 200 {
					t.Fatalf("HTTP %d %s", status, body)
				}
			default:
				cs := session(t, f, path == "memory")
				if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Meta: trMeta(), Name: "sandbox_execute_bash", Arguments: map[string]any{"cmd": cmd}}); err != nil {
					t.Fatal(err)
				}
			}
			tool := trSpan(t, rec, trParent.TraceID(), tracing.SpanSandboxTool)
			if tool.Parent().SpanID() != trParent.SpanID() || !tool.Parent().IsRemote() || tool.SpanKind() != trace.SpanKindServer {
				t.Fatalf("aiod.tool parent %v kind %v", tool.Parent(), tool.SpanKind())
			}
			ta := trAttrs(tool)
			if ta[tracing.AttrToolName].AsString() != "sandbox_execute_bash" || ta[tracing.AttrMCPMethod].AsString() != "tools/call" || ta[tracing.AttrOutcome].AsString() != "ok" {
				t.Errorf("aiod.tool attributes %v", ta)
			}
			command := trSpan(t, rec, trParent.TraceID(), tracing.SpanCommand)
			if command.Parent().SpanID() != tool.SpanContext().SpanID() {
				t.Fatalf("aiod.command parent %v, want %v", command.Parent().SpanID(), tool.SpanContext().SpanID())
			}
			ca := trAttrs(command)
			// The user's program and the length of the user's command
			// line (not of the cwd trap wrapped around it); never the line.
			if ca["process.executable.name"].AsString() != "echo" || ca["aiod.command.length"].AsInt64() != int64(len(cmd)) ||
				ca["process.exit.code"].AsInt64() != 3 || ca["aiod.session"].AsString() != SharedSession ||
				ca[tracing.AttrOutcome].AsString() != "error" || command.Status().Code != codes.Error {
				t.Errorf("aiod.command attributes %v status %v", ca, command.Status())
			}
			trNoSecret(t, rec.Ended())
		})
	}
}

// TestTraceCommandEnds: a command killed at its timeout, and one whose
// call was cancelled (the client went away), are marked so.
func TestTraceCommandEnds(t *testing.T) {
	f, rec := trFixture(t)
	call := func(ctx context.Context, args map[string]any) {
		_, _ = postCtx(t, ctx, f.url, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": "sandbox_execute_bash", "arguments": args, "_meta": trMeta()}})
	}
	ended := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			for _, s := range rec.Ended() {
				if s.Name() == name {
					return s
				}
			}
		}
		t.Fatalf("no %s span", name)
		return nil
	}

	call(context.Background(), map[string]any{"cmd": "sleep 5", "timeout": 0.3})
	c := ended(tracing.SpanCommand)
	if a := trAttrs(c); a[tracing.AttrOutcome].AsString() != "timeout" || a["aiod.command.status"].AsString() != "timed_out" || c.Status().Code != codes.Error {
		t.Errorf("timed-out command: %v %v", a, c.Status())
	}

	rec.Reset()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// The command is running once its span has started; the client
		// then goes away.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if len(rec.Started()) >= 2 {
				break
			}
		}
		cancel()
	}()
	call(ctx, map[string]any{"cmd": "sleep 5"})
	c = ended(tracing.SpanCommand)
	tool := ended(tracing.SpanSandboxTool)
	if a := trAttrs(c); a[tracing.AttrOutcome].AsString() != "cancelled" || c.Status().Code != codes.Error {
		t.Errorf("cancelled command: %v %v", a, c.Status())
	}
	if a := trAttrs(tool); a[tracing.AttrOutcome].AsString() != "cancelled" || tool.Status().Code != codes.Error {
		t.Errorf("cancelled tool: %v %v", a, tool.Status())
	}
}

// TestTraceCell: a cell run by sandbox_execute_code gets an aiod.cell
// span below aiod.tool.
func TestTraceCell(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node")
	}
	f, rec := trFixture(t)
	for _, tc := range []struct{ code, status, outcome string }{
		{"console.log(1)", "ok", "ok"},
		{"throw new Error('boom')", "error", "error"},
	} {
		rec.Reset()
		status, body := post(t, f.url, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": "sandbox_execute_code", "arguments": map[string]any{"language": "javascript", "code": tc.code}, "_meta": trMeta()}})
		if status != 200 {
			t.Fatalf("HTTP %d %s", status, body)
		}
		tool := trSpan(t, rec, trParent.TraceID(), tracing.SpanSandboxTool)
		cell := trSpan(t, rec, trParent.TraceID(), tracing.SpanCell)
		a := trAttrs(cell)
		if cell.Parent().SpanID() != tool.SpanContext().SpanID() || a["aiod.cell.language"].AsString() != "javascript" ||
			a["aiod.cell.kernel"].AsString() != "node" || a["aiod.cell.status"].AsString() != tc.status || a[tracing.AttrOutcome].AsString() != tc.outcome {
			t.Errorf("%s: aiod.cell parent %v attributes %v", tc.code, cell.Parent(), a)
		}
	}
}

// TestTraceOff: without a provider the server starts no span and a
// _meta traceparent changes nothing.
func TestTraceOff(t *testing.T) {
	f := newFixture(t, nil)
	if f.s.tracer != nil {
		t.Fatal("tracer without a provider")
	}
	status, body := post(t, f.url, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": "sandbox_execute_bash", "arguments": map[string]any{"cmd": "echo x"}, "_meta": trMeta()}})
	if status != 200 {
		t.Fatalf("HTTP %d %s", status, body)
	}
	if text, isErr := resultText(t, body); isErr || text == "" {
		t.Fatalf("%v %s", isErr, fmt.Sprint(text))
	}
}

// trSecret stands for a secret in a command line or a tool's output.
const trSecret = "s3cr3t-mcp-token"

// trNoSecret fails when trSecret is in a span's name, attributes, status
// or events.
func trNoSecret(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		texts := []string{s.Name(), s.Status().Description}
		for _, kv := range s.Attributes() {
			texts = append(texts, kv.Value.String())
		}
		for _, ev := range s.Events() {
			texts = append(texts, ev.Name)
			for _, kv := range ev.Attributes {
				texts = append(texts, kv.Value.String())
			}
		}
		for _, x := range texts {
			if strings.Contains(x, trSecret) {
				t.Errorf("span %s holds the secret: %q", s.Name(), x)
			}
		}
	}
}
