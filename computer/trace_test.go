package computer

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// trOffice is an office whose Computer traces into a span recorder and
// hosts l as bundle "mem", with two more tools on l: "meta" answers the
// _meta its request carried, and "block" signals started, then waits
// for its context to end.
func trOffice(t *testing.T, o Options) (*agent.Client, *Computer, *tracetest.SpanRecorder, chan struct{}) {
	t.Helper()
	l := newLocalServer()
	mcp.AddTool(l.srv, &mcp.Tool{Name: "meta"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		b, _ := json.Marshal(req.Params.Meta)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, struct{}{}, nil
	})
	started := make(chan struct{}, 4)
	mcp.AddTool(l.srv, &mcp.Tool{Name: "block"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return nil, struct{}{}, ctx.Err()
	})
	mcp.AddTool(l.srv, &mcp.Tool{Name: "leak"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "login failed: " + trSecret}}}, struct{}{}, nil
	})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(tracing.IDGenerator()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	o.TracerProvider = tp
	a, c := localOffice(t, l, `[]`, o)
	waitTool(t, a, "mem__block")
	return a, c, rec, started
}

// trSpans returns the ended spans of the call reqID of agent "agent",
// by name.
func trSpans(rec *tracetest.SpanRecorder, reqID string) map[string]sdktrace.ReadOnlySpan {
	out := map[string]sdktrace.ReadOnlySpan{}
	tid := tracing.TraceID("agent", reqID)
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == tid {
			out[s.Name()] = s
		}
	}
	return out
}

func trAttr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func TestTraceToolCall(t *testing.T) {
	approvals := 0
	a, _, rec, started := trOffice(t, Options{Approval: ApproveAsk, Confirm: func(context.Context, string, json.RawMessage) (bool, error) {
		approvals++
		return true, nil
	}})
	ctx := context.Background()

	t.Run("ok", func(t *testing.T) {
		id := agent.NewReqID()
		res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "mem__meta", Timeout: 5 * time.Second, ReqID: id})
		if err != nil || res.IsError || len(res.Content) != 1 {
			t.Fatalf("mem__meta = %+v, %v", res, err)
		}
		spans := trSpans(rec, id)
		call, mcpSpan, appr := spans[tracing.SpanComputerCall], spans["tools/call meta"], spans[tracing.SpanApproval]
		if call == nil || mcpSpan == nil || appr == nil {
			t.Fatalf("spans = %v", spans)
		}
		// The Computer's span has the derived ids: trace from (agent,
		// req_id), its own id, and the hub's derived span as parent.
		if call.SpanContext().SpanID() != tracing.SpanID(tracing.HopComputer, "agent", id) ||
			call.Parent().SpanID() != tracing.SpanID(tracing.HopHub, "agent", id) || !call.Parent().IsRemote() {
			t.Fatalf("computer span %v parent %v", call.SpanContext(), call.Parent())
		}
		if call.SpanKind() != trace.SpanKindServer || call.Status().Code == codes.Error {
			t.Fatalf("computer span kind %v status %v", call.SpanKind(), call.Status())
		}
		for k, want := range map[attribute.Key]string{tracing.AttrReqID: id, tracing.AttrAgent: "agent", tracing.AttrComputer: "pc",
			tracing.AttrTool: "mem__meta", attrBundleID: "mem", tracing.AttrOutcome: "ok"} {
			if got := trAttr(call, k).AsString(); got != want {
				t.Errorf("computer span %s = %q, want %q", k, got, want)
			}
		}
		if appr.Parent().SpanID() != call.SpanContext().SpanID() || !trAttr(appr, attrApproved).AsBool() || approvals != 1 {
			t.Fatalf("approval span parent %v granted %v (asked %d)", appr.Parent(), trAttr(appr, attrApproved), approvals)
		}
		if mcpSpan.Parent().SpanID() != call.SpanContext().SpanID() || mcpSpan.SpanKind() != trace.SpanKindClient ||
			trAttr(mcpSpan, tracing.AttrMCPMethod).AsString() != "tools/call" || trAttr(mcpSpan, tracing.AttrToolName).AsString() != "meta" {
			t.Fatalf("MCP span parent %v kind %v attrs %v", mcpSpan.Parent(), mcpSpan.SpanKind(), mcpSpan.Attributes())
		}
		// The MCP server got the MCP span's W3C context in _meta.
		var text struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(res.Content[0], &text)
		var meta map[string]any
		if err := json.Unmarshal([]byte(text.Text), &meta); err != nil {
			t.Fatalf("meta tool answered %q", text.Text)
		}
		sc := mcpSpan.SpanContext()
		want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		if meta["traceparent"] != want {
			t.Fatalf("_meta = %v, want traceparent %s", meta, want)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		id := agent.NewReqID()
		done := make(chan *smcp.CallToolResult, 1)
		go func() {
			res, _ := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "mem__block", Timeout: 30 * time.Second, ReqID: id})
			done <- res
		}()
		<-started
		if err := a.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if res := <-done; res == nil || !res.IsError {
			t.Fatalf("cancelled call = %+v", res)
		}
		trOutcome(t, trSpans(rec, id), "tools/call block", tracing.OutcomeCancelled)
	})

	t.Run("timeout", func(t *testing.T) {
		id := agent.NewReqID()
		res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "mem__block", Timeout: time.Second, ReqID: id})
		if err != nil || !res.IsError {
			t.Fatalf("timed-out call = %+v, %v", res, err)
		}
		<-started
		trOutcome(t, trSpans(rec, id), "tools/call block", tracing.OutcomeTimeout)
	})
}

// trOutcome checks that the Computer's span and the MCP span of a call
// are marked with outcome and the error status.
func trOutcome(t *testing.T, spans map[string]sdktrace.ReadOnlySpan, mcpName, outcome string) {
	t.Helper()
	for _, name := range []string{tracing.SpanComputerCall, mcpName} {
		s := spans[name]
		if s == nil {
			t.Fatalf("no span %s in %v", name, spans)
		}
		if got := trAttr(s, tracing.AttrOutcome).AsString(); got != outcome || s.Status().Code != codes.Error {
			t.Errorf("%s: outcome %q status %v, want %q and error", name, got, s.Status(), outcome)
		}
	}
}

func TestTraceRefusedApproval(t *testing.T) {
	a, _, rec, _ := trOffice(t, Options{Approval: ApproveAsk, Confirm: func(context.Context, string, json.RawMessage) (bool, error) {
		return false, nil
	}})
	id := agent.NewReqID()
	res, err := a.CallTool(context.Background(), agent.Call{Computer: "pc", Tool: "mem__meta", Timeout: 5 * time.Second, ReqID: id})
	if err != nil || res.ErrorCode() != smcp.CodeToolRequiresConfirmation {
		t.Fatalf("refused call = %+v, %v", res, err)
	}
	spans := trSpans(rec, id)
	call, appr := spans[tracing.SpanComputerCall], spans[tracing.SpanApproval]
	if call == nil || appr == nil || spans["tools/call meta"] != nil {
		t.Fatalf("spans = %v", spans)
	}
	if trAttr(call, tracing.AttrOutcome).AsString() != "error" || trAttr(call, tracing.AttrErrorCode).AsInt64() != smcp.CodeToolRequiresConfirmation ||
		call.Status().Code != codes.Error || trAttr(appr, attrApproved).AsBool() {
		t.Fatalf("computer span %v %v; approval %v", call.Attributes(), call.Status(), appr.Attributes())
	}
}

// TestTraceOff checks that a Computer with no provider sends no trace
// context to its MCP servers.
func TestTraceOff(t *testing.T) {
	l := newLocalServer()
	mcp.AddTool(l.srv, &mcp.Tool{Name: "meta"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		_, has := req.Params.Meta["traceparent"]
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: map[bool]string{true: "traced", false: "untraced"}[has]}}}, struct{}{}, nil
	})
	a, _ := localOffice(t, l, `[]`, Options{})
	waitTool(t, a, "mem__meta")
	res, err := a.CallTool(context.Background(), agent.Call{Computer: "pc", Tool: "mem__meta", Timeout: 5 * time.Second})
	if err != nil || len(res.Content) != 1 || string(res.Content[0]) != `{"type":"text","text":"untraced"}` {
		t.Fatalf("untraced call = %+v, %v", res, err)
	}
}

// trSecret stands for a secret in a tool's answer.
const trSecret = "s3cr3t-computer-token"

// TestTraceKeepsToolTextOut: a failed tool's text (a secret in it) is in
// none of the call's spans: their status says the outcome (and the
// error code), nothing of the tool's.
func TestTraceKeepsToolTextOut(t *testing.T) {
	a, _, rec, _ := trOffice(t, Options{})
	waitTool(t, a, "mem__leak")
	id := agent.NewReqID()
	res, err := a.CallTool(context.Background(), agent.Call{Computer: "pc", Tool: "mem__leak", Timeout: 5 * time.Second, ReqID: id})
	if err != nil || !res.IsError {
		t.Fatalf("leak = %+v, %v", res, err)
	}
	spans := trSpans(rec, id)
	for name, want := range map[string]string{tracing.SpanComputerCall: "error", "tools/call leak": "error"} {
		s := spans[name]
		if s == nil {
			t.Fatalf("no span %s in %v", name, spans)
		}
		if st := s.Status(); st.Code != codes.Error || st.Description != want {
			t.Errorf("%s: status %+v, want %q", name, st, want)
		}
	}
	for _, s := range rec.Ended() {
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
				t.Errorf("span %s holds the tool's text: %q", s.Name(), x)
			}
		}
	}
}

func TestEndSpanStatus(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	for _, tc := range []struct {
		outcome, msg string
		code         int
		want         string
	}{
		{tracing.OutcomeError, "", 4404, "error (error_code 4404)"},
		{tracing.OutcomeError, "", 0, "error"},
		{tracing.OutcomeTimeout, "", 0, "timeout"},
		{tracing.OutcomeError, "not approved", smcp.CodeToolRequiresConfirmation, "not approved (error_code 4005)"},
		{tracing.OutcomeOK, "", 0, ""},
	} {
		rec.Reset()
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		endSpan(s, tc.outcome, tc.code, tc.msg)
		if got := rec.Ended()[0].Status().Description; got != tc.want {
			t.Errorf("endSpan(%s, %d, %q): %q, want %q", tc.outcome, tc.code, tc.msg, got, tc.want)
		}
	}
}
