package a2c

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// trcSpan is one span as the test's OTLP receiver got it.
type trcSpan struct {
	service, name     string
	trace, id, parent string // lowercase hex; parent "" for a root
	errStatus         bool
	statusMsg         string
	attrs             map[string]string
}

// trcReceiver is an OTLP/HTTP trace receiver (POST /v1/traces, protobuf,
// gzip or not) on 127.0.0.1 that keeps every span it gets.
type trcReceiver struct {
	url string

	mu     sync.Mutex
	spans  []trcSpan
	notify chan struct{} // closed and replaced on every export
}

func trcReceive(t *testing.T) *trcReceiver {
	t.Helper()
	r := &trcReceiver{notify: make(chan struct{})}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			t.Errorf("OTLP receiver: %s %s %s", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(io.LimitReader(body, 64<<20))
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			t.Errorf("OTLP receiver: %v", err)
			return
		}
		r.add(&msg)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(ts.Close)
	r.url = ts.URL
	return r
}

func (r *trcReceiver) add(msg *coltracepb.ExportTraceServiceRequest) {
	var got []trcSpan
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := trcSpan{service: service, name: s.GetName(), trace: hex.EncodeToString(s.GetTraceId()),
					id: hex.EncodeToString(s.GetSpanId()), parent: hex.EncodeToString(s.GetParentSpanId()),
					errStatus: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR, statusMsg: s.GetStatus().GetMessage(),
					attrs: map[string]string{}}
				for _, kv := range s.GetAttributes() {
					switch v := kv.GetValue().GetValue().(type) {
					case *commonpb.AnyValue_StringValue:
						sp.attrs[kv.GetKey()] = v.StringValue
					case *commonpb.AnyValue_IntValue:
						sp.attrs[kv.GetKey()] = fmt.Sprint(v.IntValue)
					case *commonpb.AnyValue_BoolValue:
						sp.attrs[kv.GetKey()] = fmt.Sprint(v.BoolValue)
					}
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
}

// await waits (20 s at most) until the trace traceID holds a span of
// every name in names, and returns its spans by name (the last one
// received for a name).
func (r *trcReceiver) await(t *testing.T, traceID string, names ...string) map[string]trcSpan {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		byName := map[string]trcSpan{}
		for _, s := range r.spans {
			if s.trace == traceID {
				byName[s.name] = s
			}
		}
		notify := r.notify
		r.mu.Unlock()
		missing := []string{}
		for _, n := range names {
			if _, ok := byName[n]; !ok {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return byName
		}
		select {
		case <-notify:
		case <-deadline:
			have := []string{}
			for n, s := range byName {
				have = append(have, n+"@"+s.service)
			}
			t.Fatalf("trace %s: no span %v after 20 s; it has %v", traceID, missing, have)
			return nil
		}
	}
}

// trcSetup starts "a2c server" and "a2c computer" (hosting toolsrv with
// its trace tools as bundle "fx") exporting to a receiver, and an Agent
// of this process whose provider exports there too. The Agent is joined
// and sees fx__meta and fx__sleep.
func trcSetup(t *testing.T) (*trcReceiver, *agent.Client) {
	t.Helper()
	rcv := trcReceive(t)
	env := append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.url, "OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_SDK_DISABLED=false",
		"OTEL_TRACES_SAMPLER=always_on", "OTEL_SERVICE_NAME=", "OTEL_RESOURCE_ATTRIBUTES=")
	srvCmd := exec.Command(harness.Bin(t, "a2c"), "server", "--listen", "127.0.0.1:0")
	srvCmd.Env = env
	srv := harness.Run(t, srvCmd, true)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.json")
	doc, _ := json.Marshal(map[string]any{"servers": map[string]any{"fx": map[string]any{
		"name": "fx", "type": "stdio",
		"server_parameters": map[string]any{"command": harness.BinPkg(t, "./test/interop/a2c/testdata/toolsrv"), "args": []string{"--trace"}},
	}}})
	if err := os.WriteFile(cfg, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	office := agent.NewReqID()
	compCmd := exec.Command(harness.Bin(t, "a2c"), "computer", "--server", srv.URL, "--office", office, "--name", "pc", "--config", cfg)
	compCmd.Env = append(env, "XDG_CONFIG_HOME="+filepath.Join(dir, "xdg-config"), "XDG_CACHE_HOME="+filepath.Join(dir, "xdg-cache"),
		"XDG_STATE_HOME="+filepath.Join(dir, "xdg-state"), "XDG_DATA_HOME="+filepath.Join(dir, "xdg-data"))
	harness.Run(t, compCmd, false)

	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rcv.url+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "trace-test-agent"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(tracing.IDGenerator()), sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx)
	})
	a := dialAgent(t, srv.URL, "tracer", agent.Options{TracerProvider: tp})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	waitTools(t, a, "pc", "fx__meta", "fx__sleep")
	return rcv, a
}

// trcParent checks that child's parent is parent.
func trcParent(t *testing.T, spans map[string]trcSpan, child, parent string) {
	t.Helper()
	if spans[child].parent != spans[parent].id {
		t.Errorf("%s's parent is %q, want %s (%s)", child, spans[child].parent, parent, spans[parent].id)
	}
}

// TestTraceAcrossProcesses: a tool call through "a2c server", "a2c
// computer" and an MCP server, each a process of its own, makes one
// trace whose ids every hop derived from (agent, req_id): the Agent's
// root, the hub's relay with its queue and wire time, the Computer's
// handling and its MCP client call, whose W3C context reached the MCP
// server in params._meta. A cancelled and a timed-out call are marked
// so in the Computer's and the hub's spans.
func TestTraceAcrossProcesses(t *testing.T) {
	rcv, a := trcSetup(t)
	const agentName = "tracer"

	t.Run("ok", func(t *testing.T) {
		id := agent.NewReqID()
		res, err := a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "fx__meta", ReqID: id, Timeout: 10 * time.Second})
		if err != nil || res.IsError {
			t.Fatalf("fx__meta = %+v, %v", res, err)
		}
		tid := tracing.TraceID(agentName, id).String()
		spans := rcv.await(t, tid, tracing.SpanAgentCall, tracing.SpanHubRelay, tracing.SpanHubQueue, tracing.SpanHubWire,
			tracing.SpanComputerCall, "tools/call meta")
		root := spans[tracing.SpanAgentCall]
		if root.parent != "" || root.id != tracing.SpanID(tracing.HopAgent, agentName, id).String() || root.service != "trace-test-agent" {
			t.Errorf("agent span: %+v", root)
		}
		trcParent(t, spans, tracing.SpanHubRelay, tracing.SpanAgentCall)
		trcParent(t, spans, tracing.SpanHubQueue, tracing.SpanHubRelay)
		trcParent(t, spans, tracing.SpanHubWire, tracing.SpanHubRelay)
		trcParent(t, spans, tracing.SpanComputerCall, tracing.SpanHubRelay)
		trcParent(t, spans, "tools/call meta", tracing.SpanComputerCall)
		for name, service := range map[string]string{tracing.SpanHubRelay: "a2c-server", tracing.SpanHubQueue: "a2c-server", tracing.SpanHubWire: "a2c-server",
			tracing.SpanComputerCall: "a2c-computer", "tools/call meta": "a2c-computer"} {
			if spans[name].service != service {
				t.Errorf("%s: service %q, want %q", name, spans[name].service, service)
			}
		}
		if s := spans[tracing.SpanComputerCall]; s.attrs["a2c.outcome"] != "ok" || s.attrs["a2c.req_id"] != id || s.attrs["a2c.agent"] != agentName ||
			s.attrs["a2c.computer"] != "pc" || s.attrs["a2c.tool"] != "fx__meta" || s.attrs["a2c.bundle_id"] != "fx" || s.errStatus {
			t.Errorf("computer span: %+v", s)
		}
		if s := spans["tools/call meta"]; s.attrs["mcp.method.name"] != "tools/call" || s.attrs["gen_ai.tool.name"] != "meta" {
			t.Errorf("MCP span: %+v", s)
		}
		if s := spans[tracing.SpanHubRelay]; s.attrs["a2c.outcome"] != "ok" || s.errStatus {
			t.Errorf("hub span: %+v", s)
		}
		// The MCP server got the MCP span's context in _meta.
		var meta map[string]any
		if err := json.Unmarshal([]byte(text(res)), &meta); err != nil {
			t.Fatalf("fx__meta answered %q", text(res))
		}
		want := "00-" + tid + "-" + spans["tools/call meta"].id + "-01"
		if meta["traceparent"] != want {
			t.Errorf("the MCP server's _meta = %v, want traceparent %s", meta, want)
		}
	})

	// ended checks the outcome of a call in the Computer's, the MCP
	// client's and the hub's spans.
	ended := func(t *testing.T, id, outcome string) {
		t.Helper()
		spans := rcv.await(t, tracing.TraceID(agentName, id).String(), tracing.SpanHubRelay, tracing.SpanComputerCall, "tools/call sleep")
		for _, name := range []string{tracing.SpanComputerCall, "tools/call sleep", tracing.SpanHubRelay} {
			if s := spans[name]; s.attrs["a2c.outcome"] != outcome || !s.errStatus {
				t.Errorf("%s (%s): outcome %q error status %v (%q), want %s and error", name, s.service, s.attrs["a2c.outcome"], s.errStatus, s.statusMsg, outcome)
			}
		}
		trcParent(t, spans, tracing.SpanComputerCall, tracing.SpanHubRelay)
	}

	t.Run("cancelled", func(t *testing.T) {
		id := agent.NewReqID()
		mark := filepath.Join(t.TempDir(), "started")
		done := make(chan error, 1)
		go func() {
			res, err := a.CallTool(context.Background(), agent.Call{Computer: "pc", Tool: "fx__sleep", ReqID: id, Timeout: 30 * time.Second,
				Params: map[string]any{"seconds": 30, "mark": mark}})
			if err == nil && !res.IsError {
				err = fmt.Errorf("not cancelled: %+v", res)
			}
			done <- err
		}()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(mark); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the slow tool never started")
			}
		}
		if err := a.Cancel(ctx10(t), id); err != nil {
			t.Fatal(err)
		}
		if err := awaitEvent(t, done, "the cancelled call's answer"); err != nil {
			t.Fatal(err)
		}
		ended(t, id, tracing.OutcomeCancelled)
	})

	t.Run("timeout", func(t *testing.T) {
		id := agent.NewReqID()
		res, err := a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "fx__sleep", ReqID: id, Timeout: time.Second,
			Params: map[string]any{"seconds": 30}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "timed out") {
			t.Fatalf("timed-out call = %+v, %v", res, err)
		}
		ended(t, id, tracing.OutcomeTimeout)
	})
}
