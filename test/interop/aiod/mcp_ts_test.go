package aiod

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// mcpBuiltins are aiod's built-in tools in their documented order (spec §4).
var mcpBuiltins = []string{
	"sandbox_execute_bash", "sandbox_execute_code", "sandbox_file_operations", "sandbox_str_replace_editor",
	"sandbox_get_context", "sandbox_get_packages", "sandbox_load_skill",
	"browser_get_info", "browser_gui_screenshot", "browser_gui_execute_action",
}

// tsOut is what test/interop/aiod/node/mcp_client.cjs prints.
type tsOut struct {
	SDKLatestProtocol string `json:"sdkLatestProtocol"`
	Initialize        struct {
		ServerInfo      map[string]any `json:"serverInfo"`
		Capabilities    map[string]any `json:"capabilities"`
		ProtocolVersion string         `json:"protocolVersion"`
		HasSession      bool           `json:"hasSession"`
	} `json:"initialize"`
	Ping  map[string]any `json:"ping"`
	Tools []struct {
		Name       string `json:"name"`
		Described  bool   `json:"described"`
		SchemaType string `json:"schemaType"`
	} `json:"tools"`
	NextCursor  *string  `json:"nextCursor"`
	Bash        tsResult `json:"bash"`
	UnknownTool tsThrown `json:"unknownTool"`
	NoCmd       tsResult `json:"noCmd"`
	Prompts     tsThrown `json:"prompts"`
	Resources   tsThrown `json:"resources"`
	SetLevel    tsThrown `json:"setLevel"`
	MissingFile tsResult `json:"missingFile"`
	Terminate   tsThrown `json:"terminate"`
	NoKey       tsThrown `json:"noKey"`
	WrongKey    tsThrown `json:"wrongKey"`
}

// tsResult is a CallToolResult as the SDK parsed it.
type tsResult struct {
	Content []map[string]any `json:"content"`
	IsError bool             `json:"isError"`
}

// text is the text of the result's single text content ("" otherwise).
func (r tsResult) text() string {
	if len(r.Content) != 1 || r.Content[0]["type"] != "text" || len(r.Content[0]) != 2 {
		return ""
	}
	s, _ := r.Content[0]["text"].(string)
	return s
}

// tsThrown is what a call threw in the SDK: the error's class, code and
// message (Thrown false when it did not throw).
type tsThrown struct {
	Thrown  bool   `json:"thrown"`
	Class   string `json:"class"`
	Code    any    `json:"code"`
	Message string `json:"message"`
}

// TestAiodMCPTypeScriptClient drives aiod's POST /mcp with the official
// TypeScript SDK client (StreamableHTTPClientTransport, so the session
// transport): initialize, ping, the ten built-in tools in order, a
// command, and requirements 49, 51 and 56-58 as that client sees them.
func TestAiodMCPTypeScriptClient(t *testing.T) {
	harness.RequireNodePeer(t, "test/peers/node_modules/@modelcontextprotocol/sdk/package.json", "npm @modelcontextprotocol/sdk")
	for _, key := range []string{"", "k3y"} {
		name := "no key configured"
		if key != "" {
			name = "AIO_API_KEY set"
		}
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			var env []string
			if key != "" {
				env = []string{"AIO_API_KEY=" + key}
			}
			d := startAiod(t, env, "--workspace", ws)
			out := runTSClient(t, d, ws, key)
			checkTSClient(t, d, ws, key, out)
		})
	}
}

// runTSClient runs the node script against d and decodes its answer.
func runTSClient(t *testing.T, d *harness.Proc, ws, key string) tsOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{filepath.Join(harness.Root(), "test/interop/aiod/node/mcp_client.cjs"), d.URL + "/mcp", ws}
	if key != "" {
		args = append(args, key)
	}
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp_client.cjs: %v\nstderr:\n%s\nstdout:\n%s\naiod logs:\n%s", err, stderr.String(), stdout, d.Logs())
	}
	var out tsOut
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("mcp_client.cjs printed %q: %v", stdout, err)
	}
	t.Logf("TypeScript client saw: %s", stdout)
	return out
}

func checkTSClient(t *testing.T, d *harness.Proc, ws, key string, out tsOut) {
	t.Helper()
	eq := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			t.Errorf("%s:\n got %s\nwant %s", what, g, w)
		}
	}

	var health struct {
		Version string `json:"version"`
	}
	_, body := get(t, d.URL+"/health")
	if err := json.Unmarshal([]byte(body), &health); err != nil || health.Version == "" {
		t.Fatalf("health: %s", body)
	}
	eq("serverInfo", out.Initialize.ServerInfo, map[string]any{"name": "aiod", "version": health.Version})
	// The session transport is the Go SDK's, which leaves a false
	// listChanged out (absent means false in the MCP schema); the plain
	// path writes {"tools":{"listChanged":false}}.
	eq("capabilities", out.Initialize.Capabilities, map[string]any{"tools": map[string]any{}})
	eq("protocol version (the SDK's latest, echoed)", out.Initialize.ProtocolVersion, out.SDKLatestProtocol)
	eq("the streamable transport opened a session", out.Initialize.HasSession, true)
	eq("ping", out.Ping, map[string]any{})

	var names []string
	for _, tool := range out.Tools {
		names = append(names, tool.Name)
		if !tool.Described || tool.SchemaType != "object" {
			t.Errorf("tool %s: described %v, inputSchema.type %q", tool.Name, tool.Described, tool.SchemaType)
		}
	}
	eq("tools/list names in order", names, mcpBuiltins)
	eq("tools/list nextCursor", out.NextCursor, (*string)(nil))

	var bash map[string]any
	if err := json.Unmarshal([]byte(out.Bash.text()), &bash); err != nil || out.Bash.IsError {
		t.Errorf("echo hi: %+v", out.Bash)
	}
	eq("echo hi result text", bash, map[string]any{"status": "completed", "output": "hi\n", "exit_code": 0.0, "cwd": ws})

	eq("unknown tool (-32602 as the SDK's McpError)", out.UnknownTool, tsThrown{
		Thrown: true, Class: "McpError", Code: -32602.0, Message: "MCP error -32602: unknown tool: no_such_tool",
	})
	// prompts, resources and logging are not declared: -32601, as on the
	// plain path (aiod/mcp TestUndeclaredMethodsBothPaths).
	for method, got := range map[string]tsThrown{"prompts/list": out.Prompts, "resources/list": out.Resources, "logging/setLevel": out.SetLevel} {
		eq(method, got, tsThrown{Thrown: true, Class: "McpError", Code: -32601.0, Message: `MCP error -32601: method not found: "` + method + `"`})
	}
	eq("sandbox_execute_bash without cmd", out.NoCmd, tsResult{
		Content: []map[string]any{{"type": "text", "text": "cmd is required"}}, IsError: true,
	})

	// The file tool's failure carries the structured file error the
	// files plane answers for the same read.
	missing := filepath.Join(ws, "missing.txt")
	hdr := []string{}
	if key != "" {
		hdr = []string{"X-API-Key", key}
	}
	code, body := get(t, d.URL+"/v2/fs/read?path="+url.QueryEscape(missing), hdr...)
	var plane struct {
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &plane); code != http.StatusNotFound || err != nil {
		t.Fatalf("GET /v2/fs/read of a missing file: %d %s", code, body)
	}
	var fileRes struct {
		Action  *string         `json:"action"`
		Path    *string         `json:"path"`
		Success *bool           `json:"success"`
		Message *string         `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	var keys map[string]json.RawMessage
	text := out.MissingFile.text()
	_ = json.Unmarshal([]byte(text), &keys)
	if err := json.Unmarshal([]byte(text), &fileRes); err != nil || !out.MissingFile.IsError || len(keys) != 5 ||
		fileRes.Action == nil || *fileRes.Action != "read" || fileRes.Path == nil || *fileRes.Path != missing ||
		fileRes.Success == nil || *fileRes.Success || fileRes.Message == nil || *fileRes.Message != plane.Message {
		t.Errorf("missing file: %+v, want isError and {action:read, path:%s, success:false, message:%q, error}", out.MissingFile, missing, plane.Message)
	}
	var gotErr, planeErr any
	_ = json.Unmarshal(fileRes.Error, &gotErr)
	_ = json.Unmarshal(plane.Data, &planeErr)
	if gotErr == nil || !reflect.DeepEqual(gotErr, planeErr) {
		t.Errorf("missing file: error\n got %s\nwant %s (the files plane's data)", fileRes.Error, plane.Data)
	}

	eq("DELETE of the session", out.Terminate, tsThrown{})
	if key == "" {
		return
	}
	// The SDK quotes the body as sent: the 401 envelope and its newline.
	unauth := tsThrown{Thrown: true, Class: "StreamableHTTPError", Code: 401.0,
		Message: "Streamable HTTP error: Error POSTing to endpoint: " + `{"success":false,"message":"Unauthorized","data":null,"hint":null}` + "\n"}
	eq("no key", out.NoKey, unauth)
	eq("wrong key", out.WrongKey, unauth)
}
