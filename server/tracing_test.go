package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// trTraced is a server that traces into sr (and rec, which its trace API
// serves), with cfg's other settings.
func trTraced(t *testing.T, cfg Config) (*Server, string, *tracetest.SpanRecorder, *tracing.Recorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	rec := tracing.NewRecorder(0, 0)
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(tracing.IDGenerator()), sdktrace.WithSpanProcessor(sr), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg.TracerProvider, cfg.Recorder = tp, rec
	s, url := newTestServer(t, cfg)
	return s, url, sr, rec
}

// trSpans returns the ended spans of the call (agent, reqID), by name.
func trSpans(sr *tracetest.SpanRecorder, agent, reqID string) map[string]sdktrace.ReadOnlySpan {
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		if s.SpanContext().TraceID() == tracing.TraceID(agent, reqID) {
			out[s.Name()] = s
		}
	}
	return out
}

func trAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]any {
	out := map[attribute.Key]any{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value.AsInterface()
	}
	return out
}

// TestHubSpans checks the hub's spans of a call for each outcome, looked
// at as soon as the Agent has the answer: ids and parents derived from
// (agent, req_id), the queue and wire spans under the relay span, the
// attributes and the status.
func TestHubSpans(t *testing.T) {
	_, url, sr, _ := trTraced(t, Config{ToolCallSlack: 50 * time.Millisecond})
	comp := connect(t, url, func(e *sio.Event) any {
		var req smcp.ToolCallReq
		_ = json.Unmarshal(e.Args[0], &req)
		switch req.ToolName {
		case "b__fail":
			return map[string]any{"content": []any{map[string]any{"type": "text", "text": "no such file: /home/u/token=s3cr3t"}}, "isError": true,
				"_meta": map[string]any{smcp.MetaErrorCode: 4404}}
		case "b__cancelled":
			return map[string]any{"content": []any{}, "isError": true, "_meta": map[string]any{smcp.MetaCancelled: true}}
		case "b__never":
			return nil
		}
		return echo(e)
	})
	comp.join(smcp.RoleComputer, "c", "o")
	a := connect(t, url, nil)
	a.join(smcp.RoleAgent, "a", "o")

	for _, tc := range []struct {
		name, tool, computer string
		outcome, status      string
		code                 int64
		wire                 bool
	}{
		{"ok", "b__t", "c", tracing.OutcomeOK, "", 0, true},
		{"tool error", "b__fail", "c", tracing.OutcomeError, "error (error_code 4404)", 4404, true},
		{"cancelled", "b__cancelled", "c", tracing.OutcomeCancelled, "cancelled", 0, true},
		{"timeout", "b__never", "c", tracing.OutcomeTimeout, "timeout", 0, true},
		{"refused", "b__t", "nobody", tracing.OutcomeError, "Computer not found (error_code 404)", 404, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqID := "r-" + strings.ReplaceAll(tc.name, " ", "-")
			a.call(smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: reqID, Computer: tc.computer, ToolName: tc.tool, Timeout: 1})
			// No waiting: the spans end before the answer is written.
			spans := trSpans(sr, "a", reqID)
			relay, queue, wire := spans[tracing.SpanHubRelay], spans[tracing.SpanHubQueue], spans[tracing.SpanHubWire]
			if relay == nil || queue == nil || (wire != nil) != tc.wire || len(spans) != 2+btoi(tc.wire) {
				t.Fatalf("spans = %v", spans)
			}
			if relay.SpanContext().SpanID() != tracing.SpanID(tracing.HopHub, "a", reqID) || relay.Parent().SpanID() != tracing.SpanID(tracing.HopAgent, "a", reqID) ||
				!relay.Parent().IsRemote() || relay.SpanKind() != trace.SpanKindServer {
				t.Errorf("relay span %s parent %s", relay.SpanContext().SpanID(), relay.Parent().SpanID())
			}
			want := map[attribute.Key]any{
				tracing.AttrReqID: reqID, tracing.AttrAgent: "a", tracing.AttrComputer: tc.computer, tracing.AttrTool: tc.tool,
				tracing.AttrOffice: "o", tracing.AttrOutcome: tc.outcome,
			}
			if tc.code != 0 {
				want[tracing.AttrErrorCode] = tc.code
			}
			if got := trAttrs(relay); !mapsEqual(got, want) {
				t.Errorf("relay attributes = %v, want %v", got, want)
			}
			wantCode := codes.Unset
			if tc.outcome != tracing.OutcomeOK {
				wantCode = codes.Error
			}
			if st := relay.Status(); st.Code != wantCode || st.Description != tc.status {
				t.Errorf("relay status = %+v, want %v %q", st, wantCode, tc.status)
			}
			if queue.Parent().SpanID() != relay.SpanContext().SpanID() || queue.StartTime() != relay.StartTime() {
				t.Errorf("queue span: parent %s, start %v (relay %v)", queue.Parent().SpanID(), queue.StartTime(), relay.StartTime())
			}
			if wire == nil {
				if !queue.EndTime().Equal(relay.EndTime()) {
					t.Errorf("a refused call's queue ends at %v, the relay at %v", queue.EndTime(), relay.EndTime())
				}
				return
			}
			if wire.Parent().SpanID() != relay.SpanContext().SpanID() || !wire.StartTime().Equal(queue.EndTime()) || !wire.EndTime().Equal(relay.EndTime()) {
				t.Errorf("wire span: parent %s, %v..%v; queue ends %v, relay %v", wire.Parent().SpanID(), wire.StartTime(), wire.EndTime(), queue.EndTime(), relay.EndTime())
			}
			if st := wire.Status(); st.Code != wantCode || st.Description != tc.status {
				t.Errorf("wire status = %+v", st)
			}
			if tc.outcome == tracing.OutcomeTimeout {
				if d := wire.EndTime().Sub(wire.StartTime()); d < time.Second {
					t.Errorf("the wire span of a timed-out call lasted %v, its deadline is 1.05 s", d)
				}
			}
		})
	}
	// The failed tool's text (a secret in it) is in no span.
	for _, s := range sr.Ended() {
		texts := []string{s.Status().Description}
		for _, kv := range s.Attributes() {
			texts = append(texts, kv.Value.String())
		}
		for _, ev := range s.Events() {
			texts = append(texts, ev.Name)
		}
		for _, x := range texts {
			if strings.Contains(x, "s3cr3t") {
				t.Errorf("span %s holds the tool's text: %q", s.Name(), x)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func mapsEqual(a, b map[attribute.Key]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestHubSpansGone: the Computer leaves while the call is on the wire.
func TestHubSpansGone(t *testing.T) {
	_, url, sr, _ := trTraced(t, Config{})
	var comp *peer
	comp = connect(t, url, func(e *sio.Event) any {
		go comp.sock.Disconnect()
		return nil
	})
	comp.join(smcp.RoleComputer, "c", "o")
	a := connect(t, url, nil)
	a.join(smcp.RoleAgent, "a", "o")
	a.call(smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: "c", ToolName: "b__t", Timeout: 30})
	spans := trSpans(sr, "a", "r")
	relay, wire := spans[tracing.SpanHubRelay], spans[tracing.SpanHubWire]
	if relay == nil || wire == nil {
		t.Fatalf("spans = %v", spans)
	}
	if trAttrs(relay)[tracing.AttrOutcome] != tracing.OutcomeGone || relay.Status().Code != codes.Error || relay.Status().Description != tracing.OutcomeGone {
		t.Errorf("relay: %v %+v", trAttrs(relay), relay.Status())
	}
}

// TestHubSpansConsole: the console's calls are marked so.
func TestHubSpansConsole(t *testing.T) {
	s, url, sr, _ := trTraced(t, Config{})
	comp := connect(t, url, echo)
	comp.join(smcp.RoleComputer, "c", "o")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.LocalRequest(ctx, "o", smcp.EventToolCall, map[string]any{"req_id": "rc", "computer": "c", "tool_name": "b__t", "timeout": 5}); err != nil {
		t.Fatal(err)
	}
	relay := trSpans(sr, ConsoleAgent, "rc")[tracing.SpanHubRelay]
	if relay == nil {
		t.Fatal("no relay span")
	}
	if got := trAttrs(relay); got[tracing.AttrConsole] != true || got[tracing.AttrAgent] != ConsoleAgent || got[tracing.AttrOutcome] != tracing.OutcomeOK {
		t.Errorf("console call attributes = %v", got)
	}
	// The console is the Agent of its calls: the trace's root is its span,
	// and the relay's parent.
	root := trSpans(sr, ConsoleAgent, "rc")[tracing.SpanAgentCall]
	if root == nil {
		t.Fatal("no root span for the console's call")
	}
	if root.Parent().IsValid() || root.SpanContext().SpanID() != tracing.SpanID(tracing.HopAgent, ConsoleAgent, "rc") {
		t.Errorf("console root: parent %v, id %v", root.Parent(), root.SpanContext().SpanID())
	}
	if relay.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("relay's parent %v, want the console's span %v", relay.Parent().SpanID(), root.SpanContext().SpanID())
	}
	if got := trAttrs(root); got[tracing.AttrConsole] != true || got[tracing.AttrOutcome] != tracing.OutcomeOK {
		t.Errorf("console root attributes = %v", got)
	}
}

// TestHubSpansOff: without a provider nothing is traced and the trace API
// is not served.
func TestHubSpansOff(t *testing.T) {
	s, url := newTestServer(t, Config{})
	if s.tracer != nil {
		t.Fatal("a tracer without a provider")
	}
	o := &callObs{s: s, req: &smcp.ToolCallReq{}}
	if n := testing.AllocsPerRun(100, func() {
		s.traceSent(o)
		s.traceEnd(o, callEnd{Outcome: tracing.OutcomeOK})
	}); n != 0 {
		t.Errorf("tracing off allocates %v per call", n)
	}
	for _, r := range []struct{ method, path string }{{"GET", "/api/traces/" + tracing.TraceID("a", "r").String()}, {"POST", "/v1/traces"}} {
		req, _ := http.NewRequest(r.method, url+r.path, nil)
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s without a Recorder = %d", r.method, r.path, resp.StatusCode)
		}
	}
}

// trDo sends a request to the server and returns the status, content
// type and body.
func trDo(t *testing.T, method, url string, header map[string]string, body []byte) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

func TestTraceAPI(t *testing.T) {
	_, url, _, _ := trTraced(t, Config{Auth: TokenAuth("s3cret", "x-api-key")})
	key := map[string]string{"x-api-key": "s3cret"}
	comp := connectWith(t, url, func(o *sio.ClientOptions) { o.Auth = map[string]any{"x-api-key": "s3cret"} }, echo)
	comp.join(smcp.RoleComputer, "c", "o")
	a := connectWith(t, url, func(o *sio.ClientOptions) { o.Auth = map[string]any{"x-api-key": "s3cret"} }, nil)
	a.join(smcp.RoleAgent, "a", "o")
	a.call(smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: "r1", Computer: "c", ToolName: "b__t", Timeout: 5})
	tid := tracing.TraceID("a", "r1").String()

	code, ctype, body := trDo(t, "GET", url+"/api/traces/"+tid, key, nil)
	var info struct {
		TraceID      string         `json:"trace_id"`
		Spans        []tracing.Span `json:"spans"`
		DroppedSpans *int           `json:"dropped_spans"`
	}
	if code != 200 || ctype != "application/json" || json.Unmarshal(body, &info) != nil || info.TraceID != tid || info.DroppedSpans == nil || *info.DroppedSpans != 0 {
		t.Fatalf("GET trace = %d %s %s", code, ctype, body)
	}
	var names []string
	for _, s := range info.Spans {
		names = append(names, s.Name)
	}
	if len(names) != 3 || names[0] != tracing.SpanHubRelay || info.Spans[0].ParentID != tracing.SpanID(tracing.HopAgent, "a", "r1").String() ||
		info.Spans[0].SpanID != tracing.SpanID(tracing.HopHub, "a", "r1").String() {
		t.Errorf("spans = %s", body)
	}
	// Upper case is the same id; Bearer is the same credential.
	if code, _, _ := trDo(t, "GET", url+"/api/traces/"+strings.ToUpper(tid), map[string]string{"Authorization": "Bearer s3cret"}, nil); code != 200 {
		t.Errorf("upper case id, bearer = %d", code)
	}
	for _, tc := range []struct {
		name   string
		path   string
		header map[string]string
		code   int
		body   string
	}{
		{"no credential", "/api/traces/" + tid, nil, 401, `{"code":401,"message":"Authentication failed"}`},
		{"wrong credential", "/api/traces/" + tid, map[string]string{"x-api-key": "nope"}, 401, `{"code":401,"message":"Authentication failed"}`},
		{"unknown", "/api/traces/" + tracing.TraceID("a", "other").String(), key, 404, `{"code":404,"message":"Trace not found"}`},
		{"malformed", "/api/traces/xyz", key, 400, `{"code":400,"message":"invalid trace id"}`},
		{"zero", "/api/traces/" + strings.Repeat("0", 32), key, 400, `{"code":400,"message":"invalid trace id"}`},
		{"too long", "/api/traces/" + tid + "00", key, 400, `{"code":400,"message":"invalid trace id"}`},
	} {
		code, ctype, body := trDo(t, "GET", url+tc.path, tc.header, nil)
		if code != tc.code || ctype != "application/json" || string(body) != tc.body {
			t.Errorf("%s: %d %s %s, want %d %s", tc.name, code, ctype, body, tc.code, tc.body)
		}
	}
}

// trExport is an OTLP export of one span of the call (a, r1): the
// Computer's, as a Computer run apart would send it.
func trExport(t *testing.T) []byte {
	t.Helper()
	now := uint64(time.Now().UnixNano())
	tid, hub, comp := tracing.TraceID("a", "r1"), tracing.SpanID(tracing.HopHub, "a", "r1"), tracing.SpanID(tracing.HopComputer, "a", "r1")
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
		TraceId: tid[:], SpanId: comp[:], ParentSpanId: hub[:], Name: tracing.SpanComputerCall, StartTimeUnixNano: now, EndTimeUnixNano: now + 1e6,
	}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOTLPReceiver(t *testing.T) {
	_, url, _, rec := trTraced(t, Config{Auth: TokenAuth("s3cret", "x-api-key")})
	pb := map[string]string{"Content-Type": "application/x-protobuf", "x-api-key": "s3cret"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range pb {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(trExport(t))
	_ = zw.Close()
	var bomb bytes.Buffer
	zw = gzip.NewWriter(&bomb)
	_, _ = zw.Write(make([]byte, MaxOTLPBody+10))
	_ = zw.Close()

	for _, tc := range []struct {
		name   string
		header map[string]string
		body   []byte
		code   int
	}{
		{"no credential", map[string]string{"Content-Type": "application/x-protobuf"}, trExport(t), 401},
		{"json", with(map[string]string{"Content-Type": "application/json"}), []byte(`{"resourceSpans":[]}`), 415},
		{"no content type", with(map[string]string{"Content-Type": ""}), trExport(t), 415},
		{"brotli", with(map[string]string{"Content-Encoding": "br"}), trExport(t), 415},
		{"too large", pb, make([]byte, MaxOTLPBody+1), 413},
		{"gzip bomb", with(map[string]string{"Content-Encoding": "gzip"}), bomb.Bytes(), 413},
		{"not gzip", with(map[string]string{"Content-Encoding": "gzip"}), []byte("plain"), 400},
		{"garbage", pb, []byte{0xff, 0xff, 0xff}, 400},
		{"at the bound", pb, make([]byte, 0), 200},
		{"gzip", with(map[string]string{"Content-Encoding": "gzip"}), gz.Bytes(), 200},
		{"again, plain", with(map[string]string{"Content-Type": "application/x-protobuf; charset=binary"}), trExport(t), 200},
	} {
		code, ctype, body := trDo(t, "POST", url+"/v1/traces", tc.header, tc.body)
		if code != tc.code || ctype != "application/x-protobuf" {
			t.Errorf("%s: %d %s %q, want %d", tc.name, code, ctype, body, tc.code)
			continue
		}
		if code == 200 {
			var resp coltracepb.ExportTraceServiceResponse
			if len(body) != 0 || proto.Unmarshal(body, &resp) != nil {
				t.Errorf("%s: answer %q, want an empty ExportTraceServiceResponse", tc.name, body)
			}
		} else if len(body) == 0 {
			t.Errorf("%s: no google.rpc.Status", tc.name)
		}
	}
	// The span is held once, though it came twice.
	spans, _ := rec.Trace(tracing.TraceID("a", "r1"))
	if len(spans) != 1 || spans[0].Name != tracing.SpanComputerCall || spans[0].ParentID != tracing.SpanID(tracing.HopHub, "a", "r1").String() {
		t.Errorf("recorded = %+v", spans)
	}
}

// TestOTLPReceiverExporter points a process's tracing, as "a2c computer"
// sets it up from OTEL_EXPORTER_OTLP_ENDPOINT and _HEADERS, at the hub:
// the hub's trace API then shows its spans joined to the hub's own.
func TestOTLPReceiverExporter(t *testing.T) {
	_, url, _, _ := trTraced(t, Config{Auth: TokenAuth("s3cret", "x-api-key")})
	comp := connectWith(t, url, func(o *sio.ClientOptions) { o.Auth = map[string]any{"x-api-key": "s3cret"} }, echo)
	comp.join(smcp.RoleComputer, "c", "o")
	a := connectWith(t, url, func(o *sio.ClientOptions) { o.Auth = map[string]any{"x-api-key": "s3cret"} }, nil)
	a.join(smcp.RoleAgent, "a", "o")
	a.call(smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: "r1", Computer: "c", ToolName: "b__t", Timeout: 5})

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr, err := tracing.New(ctx, tracing.Options{Service: "a2c-computer"})
	if err != nil || !tr.Exporting {
		t.Fatalf("tracing.New = %+v, %v", tr, err)
	}
	_, s := tracing.Start(ctx, tr.Provider.Tracer("test"), tracing.HopComputer, "a", "r1", tracing.SpanComputerCall)
	s.End()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("export to the hub: %v", err)
	}
	code, _, body := trDo(t, "GET", url+"/api/traces/"+tracing.TraceID("a", "r1").String(), map[string]string{"x-api-key": "s3cret"}, nil)
	var info TraceInfo
	if code != 200 || json.Unmarshal(body, &info) != nil {
		t.Fatalf("GET = %d %s", code, body)
	}
	var got *tracing.Span
	for i, s := range info.Spans {
		if s.Name == tracing.SpanComputerCall {
			got = &info.Spans[i]
		}
	}
	if len(info.Spans) != 4 || got == nil || got.Service != "a2c-computer" || got.ParentID != tracing.SpanID(tracing.HopHub, "a", "r1").String() {
		t.Errorf("trace = %s", body)
	}

	// A wrong token: the exporter is told.
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=nope")
	tr, err = tracing.New(ctx, tracing.Options{Service: "a2c-computer"})
	if err != nil {
		t.Fatal(err)
	}
	_, s = tracing.Start(ctx, tr.Provider.Tracer("test"), tracing.HopComputer, "a", "r2", tracing.SpanComputerCall)
	s.End()
	if err := tr.ForceFlush(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("export with a wrong token: %v", err)
	}
	_ = tr.Shutdown(ctx)
}

// TestOTLPReceiverBusy: at most two exports are read and decoded at a
// time; a third is told to come back (503, Retry-After: 1, a
// google.rpc.Status UNAVAILABLE), and the two finish.
func TestOTLPReceiverBusy(t *testing.T) {
	if MaxOTLPBody != 1<<20 {
		t.Errorf("MaxOTLPBody = %d", MaxOTLPBody)
	}
	_, url, _, rec := trTraced(t, Config{})
	type answer struct {
		slow int // which slow export
		code int
		err  error
	}
	var writers []*io.PipeWriter
	live := map[int]bool{} // the slow exports not answered
	answers := make(chan answer, 16)
	// slow starts an export whose body stops after its first byte: its
	// handler holds a slot while it waits for the rest.
	slow := func() {
		i := len(writers)
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		live[i] = true
		req, err := http.NewRequest("POST", url+"/v1/traces", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{slow: i, err: err}
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answers <- answer{slow: i, code: resp.StatusCode}
		}()
		if _, err := pw.Write(trExport(t)[:1]); err != nil {
			t.Fatal(err)
		}
	}
	for range maxOTLPDecodes {
		slow()
	}
	pb := map[string]string{"Content-Type": "application/x-protobuf"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A slow export that reached the handler while a quick one below
		// held the other slot was refused itself (its first byte is read
		// before its headers go out): start another in its place, so that
		// two end up being read.
		for drained := false; !drained; {
			select {
			case a := <-answers:
				if a.err != nil || a.code != http.StatusServiceUnavailable {
					t.Fatalf("slow export %d answered before its body ended: %d, %v", a.slow, a.code, a.err)
				}
				delete(live, a.slow)
				slow()
			default:
				drained = true
			}
		}
		req, _ := http.NewRequest("POST", url+"/v1/traces", bytes.NewReader(trExport(t)))
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			var st status.Status
			if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Content-Type") != "application/x-protobuf" ||
				proto.Unmarshal(body, &st) != nil || st.Code != 14 || st.Message == "" {
				t.Errorf("busy answer: %v %q, status %v", resp.Header, body, &st)
			}
			break
		}
		if resp.StatusCode != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("while two exports are read: %d %q", resp.StatusCode, body)
		}
	}
	// A third slow export is refused at once, though its body stalls.
	slow()
	select {
	case a := <-answers:
		if a.err != nil || a.code != http.StatusServiceUnavailable {
			t.Errorf("a third slow export: %d, %v", a.code, a.err)
		}
		delete(live, a.slow)
	case <-time.After(10 * time.Second):
		t.Errorf("a third slow export, its body stalled: no answer in 10 s")
	}
	for i, pw := range writers {
		if live[i] {
			_, _ = pw.Write(trExport(t)[1:])
		}
		_ = pw.Close()
	}
	for len(live) > 0 {
		a := <-answers
		if !live[a.slow] {
			continue // refused before the quick export's 503, answered late
		}
		delete(live, a.slow)
		if a.err != nil || a.code != http.StatusOK {
			t.Errorf("slow export %d: %d, %v", a.slow, a.code, a.err)
		}
	}
	if code, _, body := trDo(t, "POST", url+"/v1/traces", pb, trExport(t)); code != http.StatusOK {
		t.Errorf("after: %d %q", code, body)
	}
	if spans, _ := rec.Trace(tracing.TraceID("a", "r1")); len(spans) != 1 {
		t.Errorf("recorded = %+v", spans)
	}
}

// TestCallObsSmall: an observed call costs the relay one small
// allocation, its callObs; the hub's span record and the call log's entry
// are made from it when needed, not carried in it (they made it 512
// bytes, most of the garbage tracing added to a relayed call).
func TestCallObsSmall(t *testing.T) {
	if n := unsafe.Sizeof(callObs{}); n > 128 {
		t.Errorf("callObs is %d bytes, want at most 128", n)
	}
}

// TestHubSpansCaller: a Caller's calls (the MCP gateway's) are traced as
// its own, not marked as the console's, and its root span links the span
// its context carries.
func TestHubSpansCaller(t *testing.T) {
	s, url, sr, _ := trTraced(t, Config{Calls: true})
	comp := connect(t, url, echo)
	comp.join(smcp.RoleComputer, "c", "o")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	who := Caller{Agent: "mcp-gw"}
	if _, err := s.Request(ctx, "o", who, smcp.EventToolCall, map[string]any{"req_id": "rg", "computer": "c", "tool_name": "b__t", "timeout": 5}); err != nil {
		t.Fatal(err)
	}
	spans := trSpans(sr, "mcp-gw", "rg")
	root, relay := spans[tracing.SpanAgentCall], spans[tracing.SpanHubRelay]
	if root == nil || relay == nil {
		t.Fatalf("spans %v", spans)
	}
	if got := trAttrs(relay); got[tracing.AttrConsole] == true || got[tracing.AttrAgent] != "mcp-gw" {
		t.Errorf("relay attributes = %v", got)
	}
	if got := trAttrs(root); got[tracing.AttrConsole] != false || got[tracing.AttrAgent] != "mcp-gw" {
		t.Errorf("root attributes = %v", got)
	}
	if links := root.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != parent.SpanID() {
		t.Errorf("root links = %v, want the caller's span", links)
	}
	calls, _, err := s.Calls("o")
	if err != nil || len(calls) != 1 || calls[0].Agent != "mcp-gw" || calls[0].Console {
		t.Errorf("call log %+v %v", calls, err)
	}
}
