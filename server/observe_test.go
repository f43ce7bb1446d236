package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

func TestClassify(t *testing.T) {
	msg := func(v any) sio.Message { return sio.Message{Args: []json.RawMessage{smcp.Encode(v)}} }
	long := strings.Repeat("é", 200) // 400 bytes: the cut lands inside a rune
	tests := []struct {
		name    string
		ans     sio.Message
		relay   string
		want    callEnd
		wantLen int // of Message, when long
	}{
		{"ok result", msg(smcp.CallToolResult{Content: []json.RawMessage{smcp.TextContent("hi")}}), outcomeOK, callEnd{Outcome: tracing.OutcomeOK}, 0},
		{"tool error", msg(smcp.ToolErrorResult(smcp.CodeToolNotFound, "unknown tool: x")), outcomeOK,
			callEnd{Outcome: tracing.OutcomeError, Code: smcp.CodeToolNotFound}, 0},
		{"timeout result", msg(smcp.TimeoutResult("Tool call timed out")), outcomeOK,
			callEnd{Outcome: tracing.OutcomeTimeout}, 0},
		{"cancelled result", msg(smcp.CancelledResult()), outcomeOK,
			callEnd{Outcome: tracing.OutcomeCancelled}, 0},
		{"error payload", msg(smcp.NewError(smcp.CodeNotFound, "Computer not found")), outcomeOK,
			callEnd{Outcome: tracing.OutcomeError, Code: smcp.CodeNotFound, Message: "Computer not found"}, 0},
		{"relay timeout", sio.Message{}, outcomeTimeout, callEnd{Outcome: tracing.OutcomeTimeout, Message: "relay deadline passed"}, 0},
		{"computer gone", sio.Message{}, outcomeGone, callEnd{Outcome: tracing.OutcomeGone, Message: "the Computer left before answering"}, 0},
		{"empty answer", sio.Message{}, outcomeOK, callEnd{Outcome: tracing.OutcomeOK}, 0},
		{"not JSON", sio.Message{Args: []json.RawMessage{json.RawMessage("{")}}, outcomeOK, callEnd{Outcome: tracing.OutcomeOK}, 0},
		{"isError with spaces", sio.Message{Args: []json.RawMessage{json.RawMessage(`{"content":[], "isError" :  true, "meta": {"error_code": 4003}}`)}}, outcomeOK,
			callEnd{Outcome: tracing.OutcomeError, Code: 4003}, 0},
		{"isError quoted in text", sio.Message{Args: []json.RawMessage{json.RawMessage(`{"content":[{"type":"text","text":"\"isError\":true \"code\""}],"isError":false}`)}}, outcomeOK,
			callEnd{Outcome: tracing.OutcomeOK}, 0},
		{"legacy timeout key", sio.Message{Args: []json.RawMessage{json.RawMessage(`{"content":[],"isError":true,"meta":{"timeout":true}}`)}}, outcomeOK,
			callEnd{Outcome: tracing.OutcomeTimeout}, 0},
		{"MCP markers under _meta", sio.Message{Args: []json.RawMessage{json.RawMessage(`{"content":[],"isError":true,"_meta":{"a2c_timeout":true,"error_code":4001}}`)}}, outcomeOK,
			callEnd{Outcome: tracing.OutcomeTimeout, Code: 4001}, 0},
		{"meta wins over _meta", sio.Message{Args: []json.RawMessage{json.RawMessage(`{"content":[],"isError":true,"meta":{"error_code":4002},"_meta":{"error_code":4001}}`)}}, outcomeOK,
			callEnd{Outcome: tracing.OutcomeError, Code: 4002}, 0},
		// A tool's own text never becomes a span's status: it may hold
		// anything, secrets included.
		{"secret in a tool's text", msg(smcp.ToolErrorResult(4000, "login failed for password hunter2")), outcomeOK, callEnd{Outcome: tracing.OutcomeError, Code: 4000}, 0},
		{"long protocol message", msg(smcp.NewError(smcp.CodeNotFound, long)), outcomeOK, callEnd{Outcome: tracing.OutcomeError, Code: smcp.CodeNotFound}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.ans, tt.relay)
			if tt.wantLen > 0 {
				if len(got.Message) != tt.wantLen || got.Message != long {
					t.Fatalf("message %q (%d bytes): want a valid prefix of at most %d bytes", got.Message, len(got.Message), tt.wantLen)
				}
				got.Message = ""
			}
			if got != tt.want {
				t.Fatalf("classify = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStatusText(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes: the cut lands inside a rune
	for _, tc := range []struct {
		e    callEnd
		want string
	}{
		{callEnd{Outcome: tracing.OutcomeError, Code: 4404}, "error (error_code 4404)"},
		{callEnd{Outcome: tracing.OutcomeError}, "error"},
		{callEnd{Outcome: tracing.OutcomeError, Code: 404, Message: "Computer not found"}, "Computer not found (error_code 404)"},
		{callEnd{Outcome: tracing.OutcomeTimeout, Message: "relay deadline passed"}, "timeout"},
		{callEnd{Outcome: tracing.OutcomeCancelled, Code: 4499}, "cancelled (error_code 4499)"},
		{callEnd{Outcome: tracing.OutcomeError, Code: 404, Message: long}, strings.Repeat("é", 128) + " (error_code 404)"},
	} {
		if got := tracing.StatusText(tc.e.Outcome, tc.e.Code, statusMessage(tc.e)); got != tc.want {
			t.Errorf("statusText(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}
