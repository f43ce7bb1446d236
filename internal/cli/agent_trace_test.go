package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// ctHub is an in-process hub with fakeComputer "pc" in office default;
// traced says the hub traces and serves its spans.
func ctHub(t *testing.T, traced bool, token string) string {
	t.Helper()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	cfg := server.Config{}
	if traced {
		rec := tracing.NewRecorder(0, 0)
		tr, err := tracing.New(context.Background(), tracing.Options{Service: "a2c-server", Recorder: rec})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
		cfg.TracerProvider, cfg.Recorder = tr.Provider, rec
	}
	if token != "" {
		cfg.Auth = server.TokenAuth(token, "x-api-key")
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o := sio.ClientOptions{Namespace: smcp.Namespace, Query: map[string][]string{smcp.QueryVersion: {smcp.ProtocolVersion}}, Handler: fakeComputer{}}
	if token != "" {
		o.Auth = map[string]any{"x-api-key": token}
	}
	s, err := sio.Dial(ctx, ts.URL, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Disconnect)
	join, _ := json.Marshal(smcp.EnterOfficeReq{Role: smcp.RoleComputer, Name: "pc", OfficeID: "default"})
	done := make(chan struct{})
	s.Request(smcp.EventJoinOffice, sio.Message{Args: []json.RawMessage{join}}, 5*time.Second, func(sio.Message, error) { close(done) })
	<-done
	return ts.URL
}

// ctResult is a2c call --json --trace's output.
type ctResult struct {
	Content []json.RawMessage `json:"content"`
	IsError bool              `json:"isError"`
	Trace   []struct {
		Name       string    `json:"name"`
		SpanID     string    `json:"span_id"`
		ParentID   *string   `json:"parent_id"`
		Start      time.Time `json:"start"`
		DurationMS *float64  `json:"duration_ms"`
		Service    string    `json:"service"`
		Status     string    `json:"status"`
	} `json:"trace"`
}

func TestCallTraceJSON(t *testing.T) {
	url := ctHub(t, true, "s3cret")
	code, out, stderr := run("call", "b__echo", "--server", url, "--token", "s3cret", "--name", "me", "--req-id", "r-json",
		"--args", `{"text":"hi"}`, "--trace", "--json")
	var res ctResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Content) != 1 || stderr != "" {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	// The result's own fields first, then "trace".
	if !strings.HasPrefix(out, "{\n  \"content\": [") || !regexp.MustCompile(`\n  "trace": \[\n    \{\n      "trace_id": "`+tracing.TraceID("me", "r-json").String()+`",`).MatchString(out) {
		t.Errorf("output = %s", out)
	}
	byName := map[string]int{}
	for i, s := range res.Trace {
		byName[s.Name] = i
		if s.ParentID == nil || s.DurationMS == nil || s.Start.IsZero() || s.SpanID == "" {
			t.Errorf("span %+v lacks a field", s)
		}
	}
	want := map[string]string{ // span -> its parent
		tracing.SpanAgentCall: "",
		tracing.SpanHubRelay:  tracing.SpanAgentCall,
		tracing.SpanHubQueue:  tracing.SpanHubRelay,
		tracing.SpanHubWire:   tracing.SpanHubRelay,
	}
	if len(res.Trace) != len(want) {
		t.Fatalf("trace = %+v", res.Trace)
	}
	for name, parent := range want {
		i, ok := byName[name]
		if !ok {
			t.Fatalf("no span %s in %+v", name, res.Trace)
		}
		s := res.Trace[i]
		wantParent := ""
		if parent != "" {
			wantParent = res.Trace[byName[parent]].SpanID
		}
		if *s.ParentID != wantParent {
			t.Errorf("%s: parent %s, want %s (%s)", name, *s.ParentID, wantParent, parent)
		}
	}
	root := res.Trace[byName[tracing.SpanAgentCall]]
	if root.SpanID != tracing.SpanID(tracing.HopAgent, "me", "r-json").String() || root.Service != "a2c-agent" || root.Status != "ok" ||
		res.Trace[0].Name != tracing.SpanAgentCall {
		t.Errorf("root = %+v", root)
	}
	if s := res.Trace[byName[tracing.SpanHubRelay]]; s.Service != "a2c-server" {
		t.Errorf("relay = %+v", s)
	}
	// Without --trace, nothing changes.
	code, out, _ = run("call", "b__echo", "--server", url, "--token", "s3cret", "--args", `{"text":"hi"}`, "--json")
	if code != 0 || strings.Contains(out, `"trace"`) {
		t.Errorf("without --trace: %d %s", code, out)
	}
}

func TestCallTraceText(t *testing.T) {
	url := ctHub(t, true, "")
	code, out, stderr := run("call", "b__echo", "--server", url, "--req-id", "r-text", "--args", `{"text":"fail"}`, "--trace")
	if code != 1 || out != "got {\"text\":\"fail\"}\n" {
		t.Fatalf("exit %d: %q %q", code, out, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	// calling ..., the trace's line, four spans, the error.
	if len(lines) != 7 || !strings.HasPrefix(lines[0], "calling b__echo on pc (req_id r-text)") ||
		!regexp.MustCompile(`^trace [0-9a-f]{32}: 4 spans, \d+\.\d{3} ms$`).MatchString(lines[1]) || lines[6] != "a2c call: tool call failed" {
		t.Fatalf("stderr =\n%s", stderr)
	}
	re := regexp.MustCompile(`^  +\+(\d+\.\d{3}) ms +(\d+\.\d{3}) ms  \|([ █]{32})\|  ( *)(\S+) +(\S+) +(.*)$`)
	wantName := []string{tracing.SpanAgentCall, tracing.SpanHubRelay, tracing.SpanHubQueue, tracing.SpanHubWire}
	wantDepth := []int{0, 2, 4, 4}
	for i, l := range lines[2:6] {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q is not a timeline line", l)
		}
		if m[5] != wantName[i] || len(m[4]) != wantDepth[i] || !strings.Contains(m[3], "█") {
			t.Errorf("line %d = %q: name %q at depth %d", i, l, m[5], len(m[4]))
		}
		if i == 0 && (m[1] != "0.000" || m[6] != "a2c-agent" || m[7] != "error") {
			t.Errorf("root line = %q", l)
		}
		if i == 1 && (m[6] != "a2c-server" || m[7] != "error") {
			t.Errorf("relay line = %q", l)
		}
	}
	// The columns line up.
	col := strings.Index(lines[2], "|")
	for _, l := range lines[3:6] {
		if strings.Index(l, "|") != col {
			t.Errorf("bars not aligned:\n%s", strings.Join(lines[2:6], "\n"))
			break
		}
	}
}

func TestCallTraceHubWithoutTraces(t *testing.T) {
	url := ctHub(t, false, "")
	code, out, stderr := run("call", "b__echo", "--server", url, "--args", `{"text":"hi"}`, "--trace")
	if code != 0 || out != "got {\"text\":\"hi\"}\n" || !strings.Contains(stderr, "a2c call: the hub keeps no spans of this call (GET /api/traces: 404); showing this process's spans only\n") ||
		!strings.Contains(stderr, ": 1 spans, ") || !strings.Contains(stderr, tracing.SpanAgentCall) {
		t.Fatalf("exit %d: %q\n%s", code, out, stderr)
	}
	code, out, stderr = run("call", "b__echo", "--server", url, "--args", `{"text":"hi"}`, "--trace", "--json")
	var res ctResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Trace) != 1 || res.Trace[0].Name != tracing.SpanAgentCall || stderr != "" {
		t.Fatalf("exit %d: %s\n%s", code, out, stderr)
	}
}

func TestPrintTimeline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spans := []tracing.Span{
		{TraceID: "t", Name: "root", SpanID: "a", Start: t0, DurationMS: 10, Service: "s1", Status: "ok"},
		{TraceID: "t", Name: "orphan", SpanID: "o", ParentID: "missing", Start: t0.Add(2 * time.Millisecond), DurationMS: 1, Status: "ok"},
		{TraceID: "t", Name: "child", SpanID: "b", ParentID: "a", Start: t0.Add(5 * time.Millisecond), DurationMS: 5, Service: "longer-service", Status: "error", StatusMessage: "timeout"},
		{TraceID: "t", Name: "loop1", SpanID: "x", ParentID: "y", Start: t0.Add(time.Millisecond), Status: "ok"},
		{TraceID: "t", Name: "loop2", SpanID: "y", ParentID: "x", Start: t0.Add(time.Millisecond), Status: "ok"},
	}
	var b bytes.Buffer
	printTimeline(&b, spans)
	want := "trace t: 5 spans, 10.000 ms\n" +
		"  +0.000 ms  10.000 ms  |████████████████████████████████|  root     s1              ok\n" +
		"  +5.000 ms   5.000 ms  |                ████████████████|    child  longer-service  error: timeout\n" +
		"  +2.000 ms   1.000 ms  |      ███                       |  orphan   -               ok\n" +
		"  +1.000 ms   0.000 ms  |   █                            |  loop1    -               ok\n" +
		"  +1.000 ms   0.000 ms  |   █                            |    loop2  -               ok\n"
	if b.String() != want {
		t.Errorf("timeline =\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	printTimeline(&b, nil)
	if b.String() != "trace: no spans\n" {
		t.Errorf("no spans: %q", b.String())
	}
}
