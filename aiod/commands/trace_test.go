package commands

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestProgram(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"echo hi", "echo"},
		{"  /usr/bin/python3 -c 'print(1)'", "python3"},
		{"API_KEY=s3cret TOKEN='x y' curl -H 'Authorization: s3cret' https://x", "curl"},
		{`"/opt/my tool/run" a`, "run"},
		{"A=1", ""},
		{"", ""},
		{"=x ls", "=x"},
		{"./", "./"},
		{strings.Repeat("p", 100), strings.Repeat("p", maxProgram)},
	} {
		if got := program(tc.line); got != tc.want {
			t.Errorf("program(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestSpanKeepsNoCommandLine: a command's span names its program and the
// line's length, never the line: a secret in it reaches no attribute,
// status or event, nor does the text of a start error.
func TestSpanKeepsNoCommandLine(t *testing.T) {
	const secret = "s3cr3t-token-42"
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	ctx, parent := tp.Tracer("t").Start(context.Background(), "parent")
	line := "GITHUB_TOKEN=" + secret + " git push https://x:" + secret + "@example.com"
	endSpan(startSpan(ctx, parent, Request{Command: "wrapped; " + line, Shown: line}, "s1"), StatusCompleted, 1, false)
	endSpanFailed(startSpan(ctx, parent, Request{Command: line}, "s1"), errors.New("fork/exec "+line+": denied"))
	parent.End()

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	for _, s := range spans[:2] {
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("attribute %s = %q", kv.Key, kv.Value.String())
			}
		}
		if attrs[attrExecutable].AsString() != "git" || attrs[attrLength].AsInt64() != int64(len(line)) {
			t.Errorf("attributes %v", attrs)
		}
		if _, ok := attrs["process.command_line"]; ok {
			t.Error("process.command_line recorded")
		}
		if strings.Contains(s.Status().Description, secret) {
			t.Errorf("status %q", s.Status().Description)
		}
		for _, ev := range s.Events() {
			if strings.Contains(ev.Name, secret) {
				t.Errorf("event %q", ev.Name)
			}
			for _, kv := range ev.Attributes {
				if strings.Contains(kv.Value.String(), secret) {
					t.Errorf("event attribute %s", kv.Key)
				}
			}
		}
	}
	if d := spans[1].Status().Description; d != "the command could not start" {
		t.Errorf("start failure status %q", d)
	}
}
