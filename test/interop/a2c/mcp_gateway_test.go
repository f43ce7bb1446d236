package a2c

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// The hub's MCP gateway (server/gateway) against MCP's own clients: the
// official conformance suite in both its versions, the TypeScript SDK's
// client and the MCP Inspector's CLI, each against a2c up's /mcp, whose
// office holds the sandbox Computer.

// gatewayRun and gatewayLeftOut hold the gateway to the active suite
// (0.1.16): every server scenario is run or named with what it needs.
// The gateway serves the office's tools and resources; the suite's
// fixture tools, prompts, completions and resource templates are not
// there.
var gatewayRun = []harness.ConformanceRun{
	{Scenario: "server-initialize"},
	{Scenario: "logging-set-level"},
	{Scenario: "ping"},
	{Scenario: "tools-list"},
	{Scenario: "server-sse-multiple-streams"},
	{Scenario: "resources-list"},
	{Scenario: "dns-rebinding-protection"},
	{Scenario: "server-sse-polling", Warnings: map[string]string{
		"server-sse-priming-event": "no stream resumption: sessions keep no event store, so a POST stream opens with no priming event (a SHOULD of SEP-1699 for resumable streams)",
		"server-sse-retry-field":   "no stream resumption, so no retry field either (SEP-1699 SHOULD)",
	}},
}

var gatewayLeftOut = map[string]string{
	"completion-complete":           "completions",
	"tools-call-simple-text":        "the test_simple_text fixture tool",
	"tools-call-image":              "the test_image_content fixture tool",
	"tools-call-audio":              "the test_audio_content fixture tool",
	"tools-call-embedded-resource":  "the test_embedded_resource fixture tool",
	"tools-call-mixed-content":      "the test_multiple_content_types fixture tool",
	"tools-call-with-logging":       "the test_tool_with_logging fixture tool",
	"tools-call-error":              "the test_error_handling fixture tool (tool errors: TestGatewayTypeScriptClient)",
	"tools-call-with-progress":      "the test_tool_with_progress fixture tool",
	"tools-call-sampling":           "the test_sampling fixture tool",
	"tools-call-elicitation":        "the test_elicitation fixture tool (the gateway's own elicitation: server/gateway TestGatewayApproval)",
	"json-schema-2020-12":           "the json_schema_2020_12_tool fixture tool",
	"elicitation-sep1034-defaults":  "the test_elicitation_sep1034_defaults fixture tool",
	"elicitation-sep1330-enums":     "the test_elicitation_sep1330_enums fixture tool",
	"resources-read-text":           "the fixture resource test://static-text",
	"resources-read-binary":         "the fixture resource test://static-binary",
	"resources-templates-read":      "resource templates",
	"resources-subscribe":           "resource subscriptions",
	"resources-unsubscribe":         "resource subscriptions",
	"prompts-list":                  "prompts (-32601: the gateway declares none)",
	"prompts-get-simple":            "prompts",
	"prompts-get-with-args":         "prompts",
	"prompts-get-embedded-resource": "prompts",
	"prompts-get-with-image":        "prompts",
}

// gatewayNext holds the gateway to the 2026-07-28 requirement set.
var gatewayNext = harness.NextLists{
	Pass: []string{
		"tools-list",
		"server-sse-multiple-streams",
		"resources-list",
		"sep-2164-resource-not-found",
		"dns-rebinding-protection",
		"http-header-validation",
		"input-required-result-unsupported-methods",
		"input-required-result-validate-input",
		"tasks-status-notifications",
	},
	Partial: map[string]map[string]string{
		"caching": {
			"sep-2549-prompts-list-caching-hints": "prompts: the gateway declares none (-32601)",
		},
		"input-required-result-ignore-extra-params": {
			"sep-2322-ignore-unexpected-params": "needs the fixture tool test_input_required_result_elicitation (a WARNING)",
		},
		"input-required-result-missing-input-response": {
			"sep-2322-missing-response-rerequests": "needs an InputRequiredResult fixture tool (a WARNING)",
		},
		"server-stateless": {
			"sep-2575-server-rejects-undeclared-capability":          "needs the suite's diagnostic tool test_missing_capability",
			"sep-2575-missing-capability-http-400":                   "needs the suite's diagnostic tool test_missing_capability",
			"sep-2575-http-server-no-independent-requests-on-stream": "needs the suite's diagnostic tool test_streaming_elicitation",
			"sep-2575-server-no-log-without-loglevel":                "needs the suite's diagnostic tool test_logging_tool",
			"sep-2575-server-sends-tools-list-changed-on-subscription": "needs a fixture tool that changes the tool list (a WARNING); " +
				"the gateway's list_changed on a subscription: server/gateway TestGatewayComputerLeaves",
		},
	},
	LeftOut: map[string]string{
		"completion-complete":                           "completions",
		"tools-call-simple-text":                        "the fixture tool test_simple_text",
		"tools-call-image":                              "the fixture tool test_image_content",
		"tools-call-audio":                              "the fixture tool test_audio_content",
		"tools-call-embedded-resource":                  "the fixture tool test_embedded_resource",
		"tools-call-mixed-content":                      "the fixture tool test_multiple_content_types",
		"tools-call-error":                              "the fixture tool test_error_handling",
		"tools-call-with-progress":                      "the fixture tool test_tool_with_progress",
		"resources-read-text":                           "the fixture resource test://static-text",
		"resources-read-binary":                         "the fixture resource test://static-binary",
		"resources-templates-read":                      "resource templates",
		"prompts-list":                                  "prompts",
		"prompts-get-simple":                            "prompts",
		"prompts-get-with-args":                         "prompts",
		"prompts-get-embedded-resource":                 "prompts",
		"prompts-get-with-image":                        "prompts",
		"input-required-result-basic-elicitation":       "an InputRequiredResult fixture tool (the gateway's own: server/gateway TestGatewayApproval)",
		"input-required-result-basic-sampling":          "an InputRequiredResult fixture tool (sampling)",
		"input-required-result-basic-list-roots":        "an InputRequiredResult fixture tool (roots)",
		"input-required-result-request-state":           "an InputRequiredResult fixture tool",
		"input-required-result-multiple-input-requests": "an InputRequiredResult fixture tool",
		"input-required-result-multi-round":             "an InputRequiredResult fixture tool",
		"input-required-result-non-tool-request":        "prompts (prompts/get asking for input)",
		"input-required-result-result-type":             "an InputRequiredResult fixture tool",
		"input-required-result-tampered-state":          "an InputRequiredResult fixture tool",
		"input-required-result-capability-check":        "an InputRequiredResult fixture tool",
		"json-schema-2020-12":                           "the fixture tool json_schema_2020_12_tool (pending, not scored)",
		"http-custom-header-server-validation":          "a tool with x-mcp-header annotations (pending, not scored)",
		"tasks-lifecycle":                               "the tasks extension (extension, not scored)",
		"tasks-capability-negotiation":                  "the tasks extension (extension, not scored)",
		"tasks-wire-fields":                             "the tasks extension (extension, not scored)",
		"tasks-request-state-removal":                   "the tasks extension (extension, not scored)",
		"tasks-mrtr-input":                              "the tasks extension (extension, not scored)",
		"tasks-request-headers":                         "the tasks extension (extension, not scored)",
		"tasks-dispatch-and-envelope":                   "the tasks extension (extension, not scored)",
		"tasks-required-task-error":                     "the tasks extension (extension, not scored)",
		"tasks-mrtr-composition":                        "the tasks extension (extension, not scored)",
	},
}

// TestGatewayConformance holds a2c up's /mcp to the active suite.
func TestGatewayConformance(t *testing.T) {
	entry := harness.RequireNodePeer(t, harness.ConformanceEntry, "npm @modelcontextprotocol/conformance")
	node := harness.RequireNode24(t)
	u := startUp(t)
	harness.HoldConformance(t, node, entry, u.URL+"/mcp", gatewayRun, gatewayLeftOut, u.Logs)
}

// TestGatewayConformanceNext holds a2c up's /mcp to the 2026-07-28
// requirement set.
func TestGatewayConformanceNext(t *testing.T) {
	entry := harness.RequireNodePeer(t, harness.ConformanceNextEntry, "npm conformance-next (@modelcontextprotocol/conformance@0.2.0-alpha.12)")
	node := harness.RequireNode24(t)
	u := startUp(t)
	harness.HoldConformanceNext(t, node, entry, u.URL+"/mcp", gatewayNext, u.Logs)
}

// gatewayTSOut is what node/mcp_gateway_client.cjs prints.
type gatewayTSOut struct {
	NoToken         tsThrown       `json:"noToken"`
	ProtocolVersion string         `json:"protocolVersion"`
	HasSession      bool           `json:"hasSession"`
	ServerInfo      map[string]any `json:"serverInfo"`
	Capabilities    map[string]any `json:"capabilities"`
	Tools           []struct {
		Name, Computer, SchemaType string
	} `json:"tools"`
	Bash struct {
		Content []struct{ Type, Text string } `json:"content"`
		IsError bool                          `json:"isError"`
	} `json:"bash"`
	UnknownTool tsThrown `json:"unknownTool"`
	Resources   []string `json:"resources"`
	Cancelled   tsThrown `json:"cancelled"`
}

// tsThrown is what a call threw in the TypeScript SDK.
type tsThrown struct {
	Thrown  bool   `json:"thrown"`
	Class   string `json:"class"`
	Code    any    `json:"code"`
	Message string `json:"message"`
}

// TestGatewayTypeScriptClient: the TypeScript SDK's client, with the
// hub's token, sees the sandbox's ten tools, calls one, gets -32602 for
// a tool nobody serves, and its cancel (an AbortSignal:
// notifications/cancelled) ends the command's process within 1 s. Without
// the token it cannot connect.
func TestGatewayTypeScriptClient(t *testing.T) {
	harness.RequireNodePeer(t, "test/peers/node_modules/@modelcontextprotocol/sdk/package.json", "npm @modelcontextprotocol/sdk")
	const token = "g4teway-t0ken"
	u := startUp(t, "--token", token)
	arg := sleepArg(30)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(harness.Root(), "test/interop/a2c/node/mcp_gateway_client.cjs"), u.URL+"/mcp", token, arg)
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp_gateway_client.cjs: %v\nstderr:\n%s\nstdout:\n%s\nlogs:\n%s", err, stderr.String(), stdout, u.Logs())
	}
	exited := time.Now()
	t.Logf("TypeScript client saw: %s", stdout)
	var out gatewayTSOut
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatal(err)
	}
	if !out.NoToken.Thrown {
		t.Error("connected without the token")
	}
	if out.ProtocolVersion != "2025-11-25" || !out.HasSession || out.ServerInfo["name"] != "a2c-gateway" {
		t.Errorf("session: %q %v %v", out.ProtocolVersion, out.HasSession, out.ServerInfo)
	}
	if len(out.Tools) != 10 {
		t.Fatalf("%d tools", len(out.Tools))
	}
	for _, tool := range out.Tools {
		if !strings.HasPrefix(tool.Name, "sandbox__") || tool.Computer != "sandbox" || tool.SchemaType != "object" {
			t.Errorf("tool %+v", tool)
		}
	}
	if out.Bash.IsError || len(out.Bash.Content) != 1 || !strings.Contains(out.Bash.Content[0].Text, `"output":"through the gateway\n"`) {
		t.Errorf("bash: %+v", out.Bash)
	}
	if !out.UnknownTool.Thrown || out.UnknownTool.Code != float64(-32602) {
		t.Errorf("unknown tool: %+v", out.UnknownTool)
	}
	if !out.Cancelled.Thrown {
		t.Errorf("the cancelled call: %+v", out.Cancelled)
	}
	for len(procsWith(t, "sleep", arg)) > 0 {
		if time.Since(exited) > time.Second {
			t.Fatalf("the cancelled command's process is still there 1 s after the client ended; logs:\n%s", u.Logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGatewayInspector: the MCP Inspector's CLI lists the office's tools
// and calls one through the gateway, with the token as a header.
func TestGatewayInspector(t *testing.T) {
	harness.RequireNodePeer(t, harness.InspectorEntry, "npm @modelcontextprotocol/inspector")
	const token = "insp3ct-t0ken"
	u := startUp(t, "--token", token)
	inspect := func(args ...string) []byte {
		t.Helper()
		return harness.Inspect(t, u.URL+"/mcp", u.Logs, append([]string{"--header", "Authorization: Bearer " + token}, args...)...)
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	// The gateway lists tools sorted by name (the MCP SDK's order).
	if out := inspect("--method", "tools/list"); json.Unmarshal(out, &list) != nil || len(list.Tools) != 10 ||
		list.Tools[0].Name != "sandbox__browser_get_info" || list.Tools[9].Name != "sandbox__sandbox_str_replace_editor" {
		t.Fatalf("tools/list: %s", out)
	}
	var call struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	out := inspect("--method", "tools/call", "--tool-name", "sandbox__sandbox_execute_bash", "--tool-arg", "cmd=echo inspected")
	if json.Unmarshal(out, &call) != nil || call.IsError || len(call.Content) != 1 || !strings.Contains(call.Content[0].Text, `"output":"inspected\n"`) {
		t.Fatalf("tools/call: %s", out)
	}
}
