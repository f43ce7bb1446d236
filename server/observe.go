package server

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// This file is where the relay tells its observers about a tool call: the
// hub's spans (tracing.go) and the console's call log and live stream
// (calls.go). The relay calls observe at receipt, sent when the request
// leaves for the Computer, and end with the answer or refusal; a nil
// *callObs (nothing observes, the default) makes every hook a no-op, so a
// server with tracing off and no console pays one branch per call.

// callObs is one observed tool call: the facts every observer reads, kept
// once (the hub's span record and the call log's entry are made from them
// when they are needed, so an observed call costs one small allocation).
type callObs struct {
	s       *Server
	req     *smcp.ToolCallReq
	office  string
	console bool // the call came from the console (see local.go)
	start   time.Time
	traceID string // the call log's (calls.go), set when it is on

	trace traceState // tracing.go
}

// observing reports whether any observer wants the server's tool calls.
func (s *Server) observing() bool { return s.tracer != nil || s.calls != nil }

// observe starts observing a tool call of member m; it returns nil when
// nothing observes or req is not a tool call.
func (s *Server) observe(m *member, req smcp.ClientRequest, start time.Time) *callObs {
	if !s.observing() {
		return nil
	}
	tc, ok := req.(*smcp.ToolCallReq)
	if !ok {
		return nil
	}
	o := &callObs{s: s, req: tc, start: start, console: m.console}
	s.mu.RLock()
	if m.office != nil {
		o.office = m.office.id
	}
	s.mu.RUnlock()
	s.callsStart(o)
	return o
}

// sent marks the moment the request leaves for the Computer (this node's
// connection to it, or another node's): the end of the hub's queue time.
func (o *callObs) sent() {
	if o == nil {
		return
	}
	o.s.traceSent(o)
}

// callEnd is how a call ended, as the observers report it.
type callEnd struct {
	// Outcome is one of the tracing.Outcome* values.
	Outcome string
	// Code is the A2C error code of a failed call (0 when none): the
	// ErrorPayload's code, or the result's _meta error_code.
	Code int
	// Message is a protocol error's message (an ErrorPayload's, the
	// hub's or the Computer's), or the relay's own words, for a span's
	// status. Never a tool's own text: a failed CallToolResult leaves it
	// empty, for its content may hold anything, secrets included.
	Message string
}

// end reports the answer the Agent gets, with the relay's own outcome
// (outcomeOK, outcomeTimeout or outcomeGone). It runs before the answer
// is written, so a span is on record by the time the Agent reads the
// answer (and so it cannot know whether the Agent is still there to get
// it: a dropped answer shows only in the relay's metrics).
func (o *callObs) end(ans sio.Message, relayOutcome string) {
	if o == nil {
		return
	}
	e := classify(ans, relayOutcome)
	o.s.traceEnd(o, e)
	o.s.callsEnd(o, e)
}

// refused reports a call the server answered with an ErrorPayload.
func (o *callObs) refused(pe *smcp.Error) {
	if o == nil {
		return
	}
	e := callEnd{Outcome: tracing.OutcomeError}
	if pe != nil {
		e.Code, e.Message = pe.Code, pe.Message
	}
	o.s.traceEnd(o, e)
	o.s.callsEnd(o, e)
}

// classify reads the outcome of a call from its answer: a CallToolResult
// (its isError and _meta markers) or an ErrorPayload.
func classify(ans sio.Message, relayOutcome string) callEnd {
	switch relayOutcome {
	case outcomeTimeout:
		return callEnd{Outcome: tracing.OutcomeTimeout, Message: "relay deadline passed"}
	case outcomeGone:
		return callEnd{Outcome: tracing.OutcomeGone, Message: "the Computer left before answering"}
	}
	var e callEnd
	e.Outcome = tracing.OutcomeOK
	if len(ans.Args) == 0 || !mayFail(ans.Args[0]) {
		return e // the common case, decided without decoding the answer
	}
	// The same readings as the Agent SDK's: smcp's own decoders (an
	// ErrorPayload; a result's markers under meta or _meta, the legacy
	// timeout key included).
	raw := ans.Args[0]
	if pe, ok := smcp.DecodeError(raw); ok {
		return callEnd{Outcome: tracing.OutcomeError, Code: pe.Code, Message: pe.Message}
	}
	var r smcp.CallToolResult
	if json.Unmarshal(raw, &r) != nil || !r.IsError {
		return e
	}
	e.Outcome, e.Code = tracing.OutcomeError, r.ErrorCode()
	switch {
	case r.Cancelled():
		e.Outcome = tracing.OutcomeCancelled
	case r.Timeout():
		e.Outcome = tracing.OutcomeTimeout
	}
	return e
}

// mayFail reports whether an answer may be a failure: an ErrorPayload
// (it has a "code" key) or a result with isError true. A false answer is
// certain (a JSON string never holds an unescaped quote, so neither
// pattern matches inside text); a true one is decoded by classify.
func mayFail(raw []byte) bool {
	if bytes.Contains(raw, []byte(`"code"`)) {
		return true
	}
	rest := raw
	for {
		i := bytes.Index(rest, []byte(`"isError"`))
		if i < 0 {
			return false
		}
		rest = rest[i+len(`"isError"`):]
		v := bytes.TrimLeft(rest, " \t\r\n")
		if len(v) > 0 && v[0] == ':' {
			v = bytes.TrimLeft(v[1:], " \t\r\n")
			if len(v) > 0 && v[0] == 't' {
				return true
			}
		}
	}
}
