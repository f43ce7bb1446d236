package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// The hub's spans of a tool call (see observe.go for the hooks):
// a2c.hub.relay from receipt to the answer, with a2c.hub.queue (receipt
// until the request leaves for the Computer) and a2c.hub.wire (from then
// to the answer) below it. The relay span takes the ids package tracing
// derives from (agent, req_id), so its parent is the Agent's span and the
// Computer's span names it as its own parent without a word on the wire.
//
// And the hub's trace API: GET /api/traces/{trace_id} serves what the
// Recorder holds, POST /v1/traces (OTLP/HTTP) takes the spans of other
// processes (a Computer run apart, pointed at the hub with
// OTEL_EXPORTER_OTLP_ENDPOINT) into it.

// traceState is what the hub's span record of a call (tracing.Relay)
// needs beyond the callObs's facts: when the request was sent, and
// whether the record has been handed over. The record itself is made
// once, at the end. In a cluster, sent and end may run on two goroutines
// (the answer of another node can come back before relayRemote marks the
// request sent), hence the mutex.
type traceState struct {
	mu    sync.Mutex
	sent  time.Time
	ended bool
}

// traceSent marks the end of the queue time and the start of the wire
// time.
func (s *Server) traceSent(o *callObs) {
	if s.tracer == nil {
		return
	}
	now := time.Now()
	t := &o.trace
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended || !t.sent.IsZero() {
		return
	}
	t.sent = now
}

// traceEnd ends the call's record with its outcome and hands it over
// (tracing.RecordRelay makes the spans: see tracing.Relay). A refused
// call was never sent, and has no wire span.
func (s *Server) traceEnd(o *callObs, e callEnd) {
	if s.tracer == nil {
		return
	}
	now := time.Now()
	t := &o.trace
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return
	}
	t.ended = true
	sent := t.sent
	t.mu.Unlock()
	req := o.req
	r := tracing.Relay{
		Agent: req.Agent, ReqID: req.ReqID, Computer: req.Computer, Tool: req.ToolName,
		Office: o.office, Console: o.console, Start: o.start, Sent: sent, End: now,
		Outcome: e.Outcome, Code: e.Code, Message: statusMessage(e), Node: s.NodeID(),
	}
	tracing.RecordRelay(s.cfg.TracerProvider, &r)
}

// statusMessage is the message a failed call's status may carry: a
// protocol error's, for an OutcomeError only.
func statusMessage(e callEnd) string {
	if e.Outcome == tracing.OutcomeError {
		return e.Message
	}
	return ""
}

// MaxOTLPBody bounds the body of POST /v1/traces, compressed or not
// (larger: 413). The OpenTelemetry SDKs' batches (512 spans at most) are
// far smaller.
const MaxOTLPBody = 1 << 20

// Bounds on the work of POST /v1/traces: at most maxOTLPDecodes requests
// are read and decoded at a time (another answers 503 with Retry-After,
// which exporters retry), each within otlpReadTimeout. With
// tracing.DecodeOTLP's own bound (a small multiple of the body), the
// receiver holds a few MiB at most, whatever it is sent.
const (
	maxOTLPDecodes  = 2
	otlpReadTimeout = 10 * time.Second
)

// TraceInfo is the answer of GET /api/traces/{trace_id}: the spans this
// hub holds of one trace (its own, and those it received over OTLP), by
// start time, and how many it dropped past the Recorder's bound.
type TraceInfo struct {
	TraceID      string         `json:"trace_id"`
	Spans        []tracing.Span `json:"spans"`
	DroppedSpans int            `json:"dropped_spans"`
}

// traceRoutes adds GET /api/traces/{trace_id} and POST /v1/traces when
// the server has a Recorder.
func (s *Server) traceRoutes(mux *http.ServeMux) {
	if s.cfg.Recorder == nil {
		return
	}
	mux.HandleFunc("GET /api/traces/{trace_id}", s.traceInfo)
	slots := make(chan struct{}, maxOTLPDecodes)
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) { s.otlpTraces(w, r, slots) })
}

// Authorized reports whether an HTTP request carries the credential a
// Socket.IO connection needs ([Config.Auth], given the request's headers
// and query): the hub's HTTP API (offices, traces) and the MCP gateway
// ask for it. A refusal counts in the rejected handshakes.
func (s *Server) Authorized(r *http.Request) bool {
	if s.cfg.Auth == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if err := s.cfg.Auth.Authenticate(ctx, &AuthRequest{Header: r.Header, Query: r.URL.Query(), RemoteAddr: r.RemoteAddr}); err != nil {
		s.metrics.rejected("auth")
		return false
	}
	return true
}

// traceInfo serves GET /api/traces/{trace_id}: 400 for an id that is not
// 32 hex digits (or all zero), 404 for a trace the Recorder does not hold.
func (s *Server) traceInfo(w http.ResponseWriter, r *http.Request) {
	if !s.Authorized(r) {
		writeJSONError(w, http.StatusUnauthorized, smcp.NewError(smcp.CodeUnauthorized, "Authentication failed"))
		return
	}
	id, err := trace.TraceIDFromHex(strings.ToLower(r.PathValue("trace_id")))
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, smcp.NewError(smcp.CodeBadRequest, "invalid trace id"))
		return
	}
	spans, dropped := s.cfg.Recorder.Trace(id)
	if spans == nil {
		writeJSONError(w, http.StatusNotFound, smcp.NewError(smcp.CodeNotFound, "Trace not found"))
		return
	}
	body, err := json.Marshal(TraceInfo{TraceID: id.String(), Spans: spans, DroppedSpans: dropped})
	if err != nil { // an attribute JSON cannot hold
		s.log.Warn("trace API: encoding a trace", "trace_id", id.String(), "err", err)
		writeJSONError(w, http.StatusInternalServerError, smcp.NewError(smcp.CodeInternal, "Trace cannot be encoded"))
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// otlpTraces serves POST /v1/traces, an OTLP/HTTP trace receiver for the
// binary protobuf encoding (gzip or not): the spans go into the Recorder,
// and the answer is an empty ExportTraceServiceResponse. Failures answer
// a google.rpc.Status as OTLP/HTTP asks: 401 without the credential, 415
// for another content type (JSON included), 413 past MaxOTLPBody, 400 for
// a body that does not decode (exporters retry none of these), and 503
// with Retry-After: 1 while maxOTLPDecodes other requests are being read
// or decoded (slots holds theirs).
func (s *Server) otlpTraces(w http.ResponseWriter, r *http.Request, slots chan struct{}) {
	if !s.Authorized(r) {
		writeOTLPError(w, http.StatusUnauthorized, "Authentication failed")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-protobuf" {
		writeOTLPError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/x-protobuf")
		return
	}
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	default:
		w.Header().Set("Retry-After", "1")
		writeOTLPError(w, http.StatusServiceUnavailable, "too many trace exports at once; retry")
		return
	}
	// A slow body must not hold a slot for long. (The server resets the
	// connection's deadline before its next request.)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(otlpReadTimeout))
	var body io.Reader = http.MaxBytesReader(w, r.Body, MaxOTLPBody)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			writeOTLPReadError(w, err)
			return
		}
		defer zr.Close()
		body = zr
	default:
		writeOTLPError(w, http.StatusUnsupportedMediaType, "Content-Encoding must be gzip or none")
		return
	}
	var buf bytes.Buffer
	// One byte past the bound tells a gzip bomb from a body at the limit.
	if _, err := buf.ReadFrom(io.LimitReader(body, MaxOTLPBody+1)); err != nil {
		writeOTLPReadError(w, err)
		return
	}
	if buf.Len() > MaxOTLPBody {
		writeOTLPError(w, http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	spans, err := tracing.DecodeOTLP(buf.Bytes())
	if err != nil {
		writeOTLPError(w, http.StatusBadRequest, "body is not an ExportTraceServiceRequest")
		return
	}
	s.cfg.Recorder.Add(spans...)
	// An empty ExportTraceServiceResponse: no field set, no bytes.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// writeOTLPReadError answers a body that could not be read: 413 past the
// bound, else 400.
func writeOTLPReadError(w http.ResponseWriter, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeOTLPError(w, http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	writeOTLPError(w, http.StatusBadRequest, "request body cannot be read")
}

// writeOTLPError answers an OTLP/HTTP request with a google.rpc.Status:
// its code (field 1) and message (field 2).
//
// The connection closes after the answer: the request's body may be
// unread (a refusal answers before reading), and net/http, before it
// answers on a connection it keeps, would wait to read what is left of
// the body, with no deadline, so a body that stalls would hold both the
// answer and the connection.
func writeOTLPError(w http.ResponseWriter, code int, msg string) {
	out := protowire.AppendTag(nil, 1, protowire.VarintType)
	out = protowire.AppendVarint(out, uint64(rpcCode(code)))
	out = protowire.AppendTag(out, 2, protowire.BytesType)
	out = protowire.AppendString(out, msg)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.Header().Set("Connection", "close")
	w.WriteHeader(code)
	_, _ = w.Write(out)
}

// rpcCode maps the receiver's HTTP statuses to gRPC codes.
func rpcCode(httpStatus int) int32 {
	switch httpStatus {
	case http.StatusUnauthorized:
		return 16 // UNAUTHENTICATED
	case http.StatusRequestEntityTooLarge:
		return 8 // RESOURCE_EXHAUSTED
	case http.StatusServiceUnavailable:
		return 14 // UNAVAILABLE
	}
	return 3 // INVALID_ARGUMENT
}

// consoleCall is the root span of a console's tool call (nil when the
// server does not trace, or the request is no tool call).
type consoleCall struct{ span trace.Span }

// callerSpan starts the Agent's span (tracing.HopAgent) of a tool call
// a [Caller] makes, so its trace has a root as an SDK Agent's has: a
// child of the span ctx carries (the MCP client's, for the gateway), if
// any.
func (s *Server) callerSpan(ctx context.Context, req smcp.ClientRequest, office string, who Caller) *consoleCall {
	tc, ok := req.(*smcp.ToolCallReq)
	if !ok || s.tracer == nil {
		return nil
	}
	_, span := tracing.Start(ctx, s.tracer, tracing.HopAgent, tc.Agent, tc.ReqID, tracing.SpanAgentCall,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			tracing.AttrReqID.String(tc.ReqID), tracing.AttrAgent.String(tc.Agent),
			tracing.AttrComputer.String(tc.Computer), tracing.AttrTool.String(tc.ToolName),
			tracing.AttrOffice.String(office), tracing.AttrConsole.Bool(who.Console)))
	return &consoleCall{span: span}
}

// wait is waitLocal that ends the console's span with the call's outcome.
func (c *consoleCall) wait(ctx context.Context, answer <-chan sio.Message) (json.RawMessage, error) {
	raw, err := waitLocal(ctx, answer)
	if c == nil {
		return raw, err
	}
	var e callEnd
	switch {
	case raw != nil:
		e = classify(sio.Message{Args: []json.RawMessage{raw}}, outcomeOK)
	case ctx.Err() != nil:
		// The call itself runs on in the relay: the console only
		// stopped waiting for it.
		e = callEnd{Outcome: tracing.OutcomeError, Message: "the console stopped waiting"}
	default:
		e = callEnd{Outcome: tracing.OutcomeError, Message: "no answer"}
	}
	tracing.End(c.span, e.Outcome, e.Code, statusMessage(e))
	return raw, err
}

// fail ends the console's span of a call that was never sent.
func (c *consoleCall) fail(err error) error {
	if c != nil {
		msg := "not sent"
		var pe *smcp.Error
		if errors.As(err, &pe) {
			msg = pe.Message
		}
		tracing.End(c.span, tracing.OutcomeError, 0, msg)
	}
	return err
}
