package a2c

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// calltrFullChain makes TestCallTrace require every hop below the hub
// (the Computer, its MCP client call, aiod's tool and command). Off, each
// of them is checked when it is there.
const calltrFullChain = true

// calltrSpan is one span of "a2c call --trace --json"'s "trace".
type calltrSpan struct {
	TraceID    string         `json:"trace_id"`
	Name       string         `json:"name"`
	SpanID     string         `json:"span_id"`
	ParentID   *string        `json:"parent_id"`
	Start      string         `json:"start"`
	DurationMS *float64       `json:"duration_ms"`
	Service    string         `json:"service"`
	Status     string         `json:"status"`
	Attributes map[string]any `json:"attributes"`
}

// calltrRun runs the a2c CLI with args, without any OTEL_* or A2C_TOKEN
// of the test's environment; it returns stdout and stderr.
func calltrRun(t *testing.T, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Bin(t, "a2c"), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "A2C_TOKEN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("a2c %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

// TestCallTrace runs "a2c call --trace" against "a2c up": one trace, the
// Agent's span its only root, the hub's relay (queue and wire) below it,
// then the Computer, its MCP call and the sandbox's tool and command; and
// the text mode's timeline.
func TestCallTrace(t *testing.T) {
	requireLinux(t)
	u := startUp(t, "--token", "s3cret")
	const agentName, reqID = "calltr-agent", "calltr-req-1"
	out, stderr := calltrRun(t, "call", "sandbox__sandbox_execute_bash", "--args", `{"cmd":"echo hi"}`, "--server", u.URL, "--token", "s3cret",
		"--name", agentName, "--req-id", reqID, "--trace", "--json")
	var res struct {
		Content []struct{ Type, Text string } `json:"content"`
		IsError bool                          `json:"isError"`
		Trace   []calltrSpan                  `json:"trace"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, `"output":"hi\n"`) {
		t.Fatalf("result (%v):\n%s\nstderr: %s", err, out, stderr)
	}
	byName := map[string]calltrSpan{}
	byID := map[string]calltrSpan{}
	var roots []string
	for _, s := range res.Trace {
		if s.ParentID == nil || s.DurationMS == nil || *s.DurationMS < 0 || s.SpanID == "" {
			t.Errorf("span without its fields: %+v", s)
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, s.Start); err != nil || !strings.Contains(s.Start, ".") {
			t.Errorf("%s: start %q is not RFC 3339 with fractional seconds", s.Name, s.Start)
		}
		if s.TraceID != tracing.TraceID(agentName, reqID).String() {
			t.Errorf("%s: trace %s, want %s", s.Name, s.TraceID, tracing.TraceID(agentName, reqID))
		}
		if *s.ParentID == "" {
			roots = append(roots, s.Name)
		}
		if strings.HasPrefix(s.Name, tracing.SpanMCPCall+" ") {
			byName[tracing.SpanMCPCall] = s
		} else {
			byName[s.Name] = s
		}
		byID[s.SpanID] = s
	}
	if len(roots) != 1 || roots[0] != tracing.SpanAgentCall {
		t.Fatalf("roots = %v, want only %s; trace:\n%s", roots, tracing.SpanAgentCall, out)
	}
	root := byName[tracing.SpanAgentCall]
	if root.SpanID != tracing.SpanID(tracing.HopAgent, agentName, reqID).String() || root.Service != "a2c-agent" || root.Status != "ok" {
		t.Errorf("root = %+v", root)
	}
	// parentIs checks child's parent, directly or (direct false) further
	// up; a missing child fails only when the full chain is required.
	parentIs := func(child, parent string, direct, required bool) {
		t.Helper()
		c, ok := byName[child]
		if !ok {
			if required || calltrFullChain {
				t.Errorf("no span %s; trace:\n%s", child, out)
			}
			return
		}
		want := byName[parent].SpanID
		for id, hops := *c.ParentID, 0; hops < 10; id, hops = *byID[id].ParentID, hops+1 {
			if id == want {
				return
			}
			if direct || byID[id].ParentID == nil {
				break
			}
		}
		t.Errorf("%s's parent is %s (%s), want %s %s", child, *c.ParentID, byID[*c.ParentID].Name, parent, want)
	}
	parentIs(tracing.SpanHubRelay, tracing.SpanAgentCall, true, true)
	parentIs(tracing.SpanHubQueue, tracing.SpanHubRelay, true, true)
	parentIs(tracing.SpanHubWire, tracing.SpanHubRelay, true, true)
	parentIs(tracing.SpanComputerCall, tracing.SpanHubRelay, true, false)
	parentIs(tracing.SpanMCPCall, tracing.SpanComputerCall, false, false)
	parentIs(tracing.SpanSandboxTool, tracing.SpanMCPCall, true, false)
	parentIs(tracing.SpanCommand, tracing.SpanSandboxTool, false, false)
	if s := byName[tracing.SpanHubRelay]; s.Service != "a2c-up" || s.Attributes["a2c.outcome"] != "ok" || s.Attributes["a2c.tool"] != "sandbox__sandbox_execute_bash" {
		t.Errorf("relay = %+v", s)
	}
	if s, ok := byName[tracing.SpanComputerCall]; ok && s.SpanID != tracing.SpanID(tracing.HopComputer, agentName, reqID).String() {
		t.Errorf("computer span id %s, want the derived one", s.SpanID)
	}

	// Text mode: the result on stdout, the timeline on stderr.
	out, stderr = calltrRun(t, "call", "sandbox__sandbox_execute_bash", "--args", `{"cmd":"echo hi"}`, "--server", u.URL, "--token", "s3cret",
		"--trace")
	if !strings.Contains(out, `"output":"hi\n"`) {
		t.Fatalf("stdout = %q", out)
	}
	t.Logf("a2c call --trace:\n%s", stderr)
	head := regexp.MustCompile(`(?m)^trace ([0-9a-f]{32}): (\d+) spans, \d+\.\d{3} ms$`).FindStringSubmatch(stderr)
	if head == nil || head[2] != "0" && !strings.Contains(stderr, "  "+tracing.SpanHubRelay+" ") {
		t.Fatalf("stderr has no timeline:\n%s", stderr)
	}
	line := regexp.MustCompile(`(?m)^ +\+0\.000 ms +\d+\.\d{3} ms  \|█+ *\|  a2c\.agent\.tool_call +a2c-agent +ok$`)
	sub := regexp.MustCompile(`(?m)^ +\+\d+\.\d{3} ms +\d+\.\d{3} ms  \|[ █]+\|    a2c\.hub\.relay +a2c-up +ok$`)
	if !line.MatchString(stderr) || !sub.MatchString(stderr) || strings.Contains(stderr, "showing this process's spans only") {
		t.Errorf("timeline:\n%s", stderr)
	}
}
