package agent

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// trProvider is a provider with the project's id generator whose ended
// spans sr holds.
func trProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(tracing.IDGenerator()), sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, sr
}

// trSpan is the ended span name of the call (agent, reqID), or nil.
func trSpan(sr *tracetest.SpanRecorder, name, agent, reqID string) sdktrace.ReadOnlySpan {
	for _, s := range sr.Ended() {
		if s.Name() == name && s.SpanContext().TraceID() == tracing.TraceID(agent, reqID) {
			return s
		}
	}
	return nil
}

func trAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]any {
	out := map[attribute.Key]any{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value.AsInterface()
	}
	return out
}

// TestCallToolSpan checks the Agent's span of a call for each outcome:
// the root of the call's trace, with the derived ids, the call's
// attributes, the outcome and the status.
func TestCallToolSpan(t *testing.T) {
	tp, sr := trProvider(t)
	_, url := startFake(t, func(e *sio.Event) []json.RawMessage {
		var req smcp.ToolCallReq
		_ = json.Unmarshal(e.Args[0], &req)
		switch {
		case e.Name == smcp.EventJoinOffice:
			return raw("true", "null")
		case e.Name == smcp.EventCancelToolCall:
			return []json.RawMessage{}
		}
		switch req.ToolName {
		case "b__ok":
			return raw(`{"content":[],"isError":false}`)
		case "b__fail":
			return raw(`{"content":[{"type":"text","text":"boom: s3cr3t-agent"}],"isError":true,"_meta":{"error_code":4404}}`)
		case "b__timeout":
			return raw(`{"content":[{"type":"text","text":"late"}],"isError":true,"_meta":{"a2c_timeout":true}}`)
		case "b__cancelled":
			return raw(`{"content":[],"isError":true,"_meta":{"a2c_cancelled":true}}`)
		case "b__refused":
			return raw(`{"code":404,"message":"Computer not found"}`)
		}
		return nil // never
	})
	c := dial(t, url, Options{TracerProvider: tp, CallSlack: 50 * time.Millisecond})
	if err := c.Join(context.Background(), "o"); err != nil {
		t.Fatal(err)
	}
	// A span of the caller's: the call's span is a new root, linked to it.
	outerCtx, outer := tp.Tracer("test").Start(context.Background(), "outer")
	defer outer.End()

	for _, tc := range []struct {
		name, tool      string
		cancelAfter     time.Duration
		outcome, status string
		code            int64
	}{
		{"ok", "b__ok", 0, tracing.OutcomeOK, "", 0},
		{"tool error", "b__fail", 0, tracing.OutcomeError, "error (error_code 4404)", 4404}, // not the tool's text
		{"timeout result", "b__timeout", 0, tracing.OutcomeTimeout, "timeout", 0},
		{"cancelled result", "b__cancelled", 0, tracing.OutcomeCancelled, "cancelled", 0},
		{"protocol error", "b__refused", 0, tracing.OutcomeError, "Computer not found (error_code 404)", 404},
		{"local timeout", "b__never", 0, tracing.OutcomeTimeout, "timeout", 0},
		{"ctx cancelled", "b__never", 100 * time.Millisecond, tracing.OutcomeCancelled, "cancelled", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := outerCtx
			if tc.cancelAfter > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.cancelAfter)
				defer cancel()
			}
			reqID := NewReqID()
			_, _ = c.CallTool(ctx, Call{Computer: "pc", Tool: tc.tool, ReqID: reqID, Timeout: time.Second})
			s := trSpan(sr, tracing.SpanAgentCall, "agent", reqID)
			if s == nil {
				t.Fatal("no span")
			}
			if s.SpanContext().SpanID() != tracing.SpanID(tracing.HopAgent, "agent", reqID) || s.Parent().IsValid() || s.SpanKind() != trace.SpanKindClient {
				t.Errorf("span %s, parent %v, kind %v", s.SpanContext().SpanID(), s.Parent(), s.SpanKind())
			}
			if l := s.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != outer.SpanContext().SpanID() {
				t.Errorf("links = %+v", l)
			}
			want := map[attribute.Key]any{tracing.AttrReqID: reqID, tracing.AttrAgent: "agent", tracing.AttrComputer: "pc",
				tracing.AttrTool: tc.tool, tracing.AttrOffice: "o", tracing.AttrOutcome: tc.outcome}
			if tc.code != 0 {
				want[tracing.AttrErrorCode] = tc.code
			}
			got := trAttrs(s)
			if len(got) != len(want) {
				t.Errorf("attributes = %v, want %v", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
			wantCode := codes.Error
			if tc.outcome == tracing.OutcomeOK {
				wantCode = codes.Unset
			}
			if st := s.Status(); st.Code != wantCode || st.Description != tc.status {
				t.Errorf("status = %+v, want %v %q", st, wantCode, tc.status)
			}
		})
	}
}

// TestCallToolSpanOff: without a provider the call is as before.
func TestCallToolSpanOff(t *testing.T) {
	_, url := startFake(t, func(e *sio.Event) []json.RawMessage {
		if e.Name == smcp.EventJoinOffice {
			return raw("true", "null")
		}
		return raw(`{"content":[],"isError":false}`)
	})
	c := dial(t, url, Options{})
	if err := c.Join(context.Background(), "o"); err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(context.Background(), Call{Computer: "pc", Tool: "b__t"}); err != nil || res.IsError {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestCallToolSpanJoinsHub: through a real hub that traces with its own
// provider, the hub's relay span is the child of the Agent's span; a call
// whose connection is lost is an error.
func TestCallToolSpanJoinsHub(t *testing.T) {
	agentTP, agentSR := trProvider(t)
	hubTP, hubSR := trProvider(t)
	h := newHub(t, server.Config{TracerProvider: hubTP})
	a := dialHub(t, h, Options{TracerProvider: agentTP, Reconnect: ReconnectOptions{MinDelay: time.Hour}})
	if err := a.Join(ctx5(t), "office"); err != nil {
		t.Fatal(err)
	}
	joinPeer(t, h, smcp.RoleComputer, "office", "pc", echo)
	if _, err := a.CallTool(ctx5(t), Call{Computer: "pc", Tool: "b__t", ReqID: "r1"}); err != nil {
		t.Fatal(err)
	}
	as, hs := trSpan(agentSR, tracing.SpanAgentCall, "agent", "r1"), trSpan(hubSR, tracing.SpanHubRelay, "agent", "r1")
	if as == nil || hs == nil {
		t.Fatalf("agent span %v, hub span %v", as, hs)
	}
	if hs.Parent().SpanID() != as.SpanContext().SpanID() || hs.SpanContext().TraceID() != as.SpanContext().TraceID() {
		t.Errorf("hub span's parent %s in %s; agent span %s in %s", hs.Parent().SpanID(), hs.SpanContext().TraceID(),
			as.SpanContext().SpanID(), as.SpanContext().TraceID())
	}

	slow := joinPeer(t, h, smcp.RoleComputer, "office", "slow", nil) // never answers
	done := make(chan error, 1)
	go func() {
		_, err := a.CallTool(context.Background(), Call{Computer: "slow", Tool: "b__t", ReqID: "r2", Timeout: time.Minute})
		done <- err
	}()
	wait(t, slow.calls, "the tool call at the Computer")
	h.stop()
	if err := wait(t, done, "CallTool to return"); !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("err = %v", err)
	}
	s := trSpan(agentSR, tracing.SpanAgentCall, "agent", "r2")
	if s == nil || trAttrs(s)[tracing.AttrOutcome] != tracing.OutcomeError || s.Status().Code != codes.Error {
		t.Errorf("span of a lost call = %+v", s)
	}
}
