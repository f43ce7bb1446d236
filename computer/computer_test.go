package computer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/mcphost"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// upstream is a real MCP server over streamable HTTP whose tools/call
// requests for tools named "status-NNN[-challenge]" are refused at the
// HTTP layer with that status, as a protected MCP server would.
func upstream(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	type msg struct {
		Message string `json:"message"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in msg) (*mcp.CallToolResult, msg, error) {
		return nil, in, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big-image"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "here"}, &mcp.ImageContent{Data: bigImage, MIMEType: "image/png"},
			&mcp.ImageContent{Data: []byte("tiny"), MIMEType: "image/png"}}}, struct{}{}, nil
	})
	for _, name := range []string{"status-401", "status-401-challenge", "status-403", "status-500"} {
		mcp.AddTool(s, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
			return nil, struct{}{}, nil
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			_ = json.Unmarshal(body, &m)
			if m.Method == "tools/call" && strings.HasPrefix(m.Params.Name, "status-") {
				var code int
				fmt.Sscanf(strings.TrimPrefix(m.Params.Name, "status-"), "%d", &code)
				if strings.HasSuffix(m.Params.Name, "-challenge") {
					w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
				}
				http.Error(w, http.StatusText(code), code)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// office starts a signalling server and a Computer serving cfg, and
// returns an Agent joined to the Computer's office. All three speak
// o.ProtocolVersion (default the current one).
func office(t *testing.T, cfgJSON string, o Options, ao ...agent.Options) (*agent.Client, *Computer) {
	t.Helper()
	srv, err := server.New(server.Config{Version: o.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	cfg, err := config.Parse([]byte(cfgJSON), "test.json")
	if err != nil {
		t.Fatal(err)
	}
	o.Server, o.Office, o.Name, o.Config = ts.URL, "o", "pc", cfg
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; c.Close() })
	actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer acancel()
	var aopts agent.Options
	if len(ao) > 0 {
		aopts = ao[0]
	}
	aopts.Name = "agent"
	if aopts.ProtocolVersion == "" {
		aopts.ProtocolVersion = o.ProtocolVersion
	}
	a, err := agent.Dial(actx, ts.URL, aopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Join(actx, "o"); err != nil {
		t.Fatal(err)
	}
	return a, c
}

func waitTool(t *testing.T, a *agent.Client, name string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		tools, err := a.Tools(ctx, "pc")
		cancel()
		for _, tl := range tools {
			if err == nil && tl.Name == name {
				return
			}
		}
	}
	t.Fatalf("tool %s never appeared", name)
}

// TestAuthErrors runs the upstream authorisation vectors of the protocol's
// conformance fixture (the streamable HTTP ones) against a real MCP server,
// plus a 5xx that must stay 4003.
func TestAuthErrors(t *testing.T) {
	url := upstream(t)
	a, _ := office(t, fmt.Sprintf(`{"name":"up","type":"streamable","server_parameters":{"url":%q}}`, url), Options{})
	waitTool(t, a, "up__echo")

	raw, err := os.ReadFile("testdata/auth_error_conformance_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Vectors []struct {
			Desc      string `json:"desc"`
			Transport string `json:"transport"`
			Upstream  struct {
				Status          int     `json:"status"`
				WWWAuthenticate *string `json:"www_authenticate"`
			} `json:"upstream"`
			Expected struct {
				ErrorCode int  `json:"error_code"`
				IsError   bool `json:"isError"`
				Hangs     bool `json:"hangs"`
			} `json:"expected"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &fixture); err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name      string
		tool      string
		wantCode  int
		wantHint  bool
		wantHangs bool
	}
	var cases []tc
	for _, v := range fixture.Vectors {
		if v.Transport != "streamable_http" {
			continue // the hand-written SSE client path is the Rust SDK's own
		}
		tool := fmt.Sprintf("up__status-%d", v.Upstream.Status)
		if v.Upstream.WWWAuthenticate != nil {
			tool += "-challenge"
		}
		cases = append(cases, tc{v.Desc, tool, v.Expected.ErrorCode, true, v.Expected.Hangs})
	}
	if len(cases) != 3 {
		t.Fatalf("fixture has %d streamable vectors, want 3", len(cases))
	}
	cases = append(cases, tc{"500 stays a plain execution failure", "up__status-500", smcp.CodeToolExecutionFailed, false, false})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: c.tool, Timeout: 15 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); !c.wantHangs && d > 5*time.Second {
				t.Errorf("took %v: an authorisation failure must not wait for the timeout", d)
			}
			if !res.IsError || res.ErrorCode() != c.wantCode {
				t.Fatalf("result = %+v", res)
			}
			if server, _ := res.Marker(smcp.MetaMCPServer); server != "up" {
				t.Errorf("meta.mcp_server = %v", server)
			}
			hint, ok := res.Marker(smcp.MetaAuthHint)
			if ok != c.wantHint {
				t.Errorf("auth_hint present = %v", ok)
			}
			if b, _ := json.Marshal(hint); strings.Contains(string(b), "http") || strings.Contains(string(b), "Bearer") {
				t.Errorf("auth_hint leaks a URL or credential: %s", b)
			}
		})
	}
	res, err := a.CallTool(context.Background(), agent.Call{Computer: "pc", Tool: "up__echo", Params: map[string]string{"message": "still fine"}, Timeout: 5 * time.Second})
	if err != nil || res.IsError {
		t.Fatalf("echo after the failures: %+v, %v", res, err)
	}
}

// TestApprovalAndHistory checks the approval gate and the call history.
func TestApprovalAndHistory(t *testing.T) {
	url := upstream(t)
	cfg := fmt.Sprintf(`{"name":"up","type":"streamable","server_parameters":{"url":%q},
		"tool_meta":{"status-500":{"auto_apply":true}}}`, url)
	asked := make(chan string, 4)
	a, c := office(t, cfg, Options{Approval: ApproveAsk, Confirm: func(_ context.Context, tool string, _ json.RawMessage) (bool, error) {
		asked <- tool
		return false, nil
	}})
	waitTool(t, a, "up__echo")
	ctx := context.Background()
	res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "up__echo", Params: map[string]string{"message": "x"}, Timeout: 5 * time.Second})
	if err != nil || res.ErrorCode() != smcp.CodeToolRequiresConfirmation || <-asked != "up__echo" {
		t.Fatalf("refused call = %+v, %v", res, err)
	}
	// auto_apply skips the question.
	res, err = a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "up__status-500", Timeout: 5 * time.Second})
	if err != nil || res.ErrorCode() != smcp.CodeToolExecutionFailed {
		t.Fatalf("auto-applied call = %+v, %v", res, err)
	}
	select {
	case tool := <-asked:
		t.Fatalf("asked about %s despite auto_apply", tool)
	default:
	}
	h := c.History()
	if len(h) != 2 || h[0].Outcome != "refused" || h[1].Tool != "up__status-500" || h[1].Outcome != "error" {
		t.Fatalf("history = %+v", h)
	}
}

// bigImage is a 2 MB binary result, over the inline budget.
var bigImage = bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 0, 1, 2, 3}, 256<<10)

// TestLargeResultAsBlob checks that a large binary item becomes a blob
// handle that the Agent reads back, verified, through client:get_blob,
// while a small one stays inline.
func TestLargeResultAsBlob(t *testing.T) {
	url := upstream(t)
	a, _ := office(t, fmt.Sprintf(`{"name":"up","type":"streamable","server_parameters":{"url":%q}}`, url), Options{})
	waitTool(t, a, "up__big-image")
	ctx := context.Background()
	res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "up__big-image", Timeout: 10 * time.Second})
	if err != nil || res.IsError || len(res.Content) != 3 {
		t.Fatalf("result = %+v, %v", res, err)
	}
	var big struct {
		Type, Data, MimeType string
		Meta                 map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(res.Content[1], &big)
	handle, _ := big.Meta[smcp.MetaBlobHandle].(string)
	if big.Type != "image" || big.Data != "" || big.MimeType != "image/png" || handle == "" ||
		big.Meta[smcp.MetaTotalSize] != float64(len(bigImage)) {
		t.Fatalf("offloaded item = %+v", big)
	}
	if !strings.Contains(string(res.Content[2]), `"data":"dGlueQ=="`) {
		t.Errorf("small item not inline: %s", res.Content[2])
	}
	data, meta, err := a.Blob(ctx, "pc", handle, 0)
	if err != nil || !bytes.Equal(data, bigImage) || meta.SHA256 != big.Meta[smcp.MetaSHA256] {
		t.Fatalf("blob: %d bytes, %v", len(data), err)
	}
	_, _, err = a.Blob(ctx, "pc", handle[:len(handle)-3]+"xyz", 0)
	var pe *smcp.Error
	if !errors.As(err, &pe) || pe.Code != smcp.CodeBlobNotAccessible || pe.Reason() != smcp.ReasonInvalidHandle {
		t.Fatalf("forged handle: %v", err)
	}
}

// TestResourcesCapability checks 4015 for a server that declares no
// resources capability, and 4014 for an unknown bundle_id.
func TestResourcesCapability(t *testing.T) {
	url := upstream(t)
	a, _ := office(t, fmt.Sprintf(`{"name":"up","type":"streamable","server_parameters":{"url":%q}}`, url), Options{})
	waitTool(t, a, "up__echo")
	_, err := a.Resources(context.Background(), "pc", "up", nil)
	var pe *smcp.Error
	if !errors.As(err, &pe) || pe.Code != smcp.CodeCapabilityNotSupported || pe.MCPServer != "up" || pe.MCPServerName != "up" || pe.Capability != "resources" {
		t.Fatalf("4015: %#v", err)
	}
	_, err = a.Resources(context.Background(), "pc", "ghost", nil)
	if !errors.As(err, &pe) || pe.Code != smcp.CodeMCPServerNotFound || pe.MCPServer != "ghost" {
		t.Fatalf("4014: %#v", err)
	}
}

// windowServer is an MCP server with window:// resources (and one that is
// not a window), over streamable HTTP. It returns the server so a test can
// announce changes.
func windowServer(t *testing.T, windows map[string]struct {
	text       string
	priority   float64
	fullscreen bool
}) (string, *mcp.Server) {
	s := mcp.NewServer(&mcp.Implementation{Name: "win", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	add := func(uri, text string, priority float64, fullscreen bool) {
		r := &mcp.Resource{URI: uri, Name: uri, MIMEType: "text/plain", Annotations: &mcp.Annotations{Priority: priority}}
		if fullscreen {
			r.Meta = mcp.Meta{"fullscreen": true}
		}
		s.AddResource(r, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: text}}}, nil
		})
	}
	for uri, w := range windows {
		add(uri, w.text, w.priority, w.fullscreen)
	}
	add("file:///not-a-window", "x", 1, false)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, s
}

func TestDesktop(t *testing.T) {
	type w = struct {
		text       string
		priority   float64
		fullscreen bool
	}
	url1, s1 := windowServer(t, map[string]w{
		"window://app/main": {"main window", 0.5, false},
		"window://app/side": {"side panel", 0.9, false},
	})
	url2, _ := windowServer(t, map[string]w{
		"window://term/1": {"shell", 0.1, false},
		"window://term/2": {"full screen", 0.2, true},
	})
	cfg := fmt.Sprintf(`[{"name":"a","type":"streamable","server_parameters":{"url":%q}},
		{"name":"b","type":"streamable","server_parameters":{"url":%q}}]`, url1, url2)
	updates := make(chan agent.Notification, 16)
	a, _ := office(t, cfg, Options{}, agent.Options{OnNotify: func(n agent.Notification) {
		if n.Event == smcp.NotifyUpdateDesktop {
			updates <- n
		}
	}})
	ctx := context.Background()
	var got []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var err error
		if got, err = a.Desktop(ctx, "pc", nil, ""); err == nil && len(got) == 3 {
			break
		}
	}
	want := []string{"window://app/side\n\nside panel", "window://app/main\n\nmain window", "window://term/2\n\nfull screen"}
	if !slices.Equal(got, want) {
		t.Fatalf("desktop = %q, want %q", got, want)
	}
	one := 1
	if got, err := a.Desktop(ctx, "pc", &one, ""); err != nil || len(got) != 1 || got[0] != want[0] {
		t.Fatalf("desktop_size 1 = %q, %v", got, err)
	}
	if got, err := a.Desktop(ctx, "pc", nil, "window://app/main"); err != nil || len(got) != 1 || got[0] != want[1] {
		t.Fatalf("window filter = %q, %v", got, err)
	}
	if got, err := a.Desktop(ctx, "pc", nil, "window://nope"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("unmatched window = %q, %v", got, err)
	}
	// A window that changes reaches the office as notify:update_desktop
	// (the Computer subscribed to it when it read the desktop).
	if err := s1.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "window://app/main"}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-updates:
		if n.Computer != "pc" {
			t.Fatalf("notification %+v", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notify:update_desktop")
	}
}

// tagServer is a real MCP server over streamable HTTP whose tools declare
// a2c_tool_meta in their _meta as MCP servers may from 0.4.0: safe_read
// declares {"tags": ["read"], "auto_apply": true} (the conformance fixture,
// §2.6) beside a native key; the others a malformed or no declaration.
func tagServer(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "tags", Version: "1"}, nil)
	tools := map[string]mcp.Meta{
		"safe_read":   {"custom_key": "v", "a2c_tool_meta": map[string]any{"tags": []string{"read"}, "auto_apply": true}},
		"str_tags":    {"custom_key": "w", "a2c_tool_meta": map[string]any{"tags": "read"}},
		"json_string": {"a2c_tool_meta": `{"tags":["read"]}`},
		"not_object":  {"a2c_tool_meta": []string{"read"}},
		"null_decl":   {"a2c_tool_meta": nil},
		"no_tags":     {"a2c_tool_meta": map[string]any{"alias": "evil", "ret_object_mapper": map[string]any{"a": "b"}}},
		"plain":       nil,
	}
	for name, meta := range tools {
		mcp.AddTool(s, &mcp.Tool{Name: name, Meta: meta}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + name}}}, struct{}{}, nil
		})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// parsedToolMeta returns the parsed a2c_tool_meta of tool (nil when the
// key is absent), failing unless it is a JSON string holding an object
// with exactly the four ToolMeta keys.
func parsedToolMeta(t *testing.T, tool smcp.SMCPTool) map[string]any {
	t.Helper()
	v, ok := tool.Meta[smcp.MetaKeyToolMeta]
	if !ok {
		return nil
	}
	s, isString := v.(string)
	if !isString {
		t.Fatalf("%s: a2c_tool_meta is %T, want a JSON string", tool.Name, v)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%s: a2c_tool_meta %s: %v", tool.Name, s, err)
	}
	keys := slices.Sorted(maps.Keys(m))
	if !slices.Equal(keys, []string{"alias", "auto_apply", "ret_object_mapper", "tags"}) {
		t.Fatalf("%s: a2c_tool_meta keys = %v, want all four ToolMeta keys", tool.Name, keys)
	}
	return m
}

// TestServerToolTags runs the server-declared tool tags vectors of the
// conformance tests (§2.6, data-structures §ToolMeta three-layer merge)
// through client:get_tools: the configuration's tool_meta over
// default_tool_meta over the server's declaration, tags only from the
// server, the key removed when nothing is left, native keys kept.
func TestServerToolTags(t *testing.T) {
	url := tagServer(t)
	// canonical builds the expected parsed a2c_tool_meta.
	canonical := func(autoApply, tags any) map[string]any {
		return map[string]any{"auto_apply": autoApply, "alias": nil, "ret_object_mapper": nil, "tags": tags}
	}
	list := func(s ...string) []any {
		out := []any{}
		for _, x := range s {
			out = append(out, x)
		}
		return out
	}
	tests := []struct {
		name    string
		version string
		meta    string // tool_meta / default_tool_meta fields of the server entry
		want    map[string]map[string]any
	}{
		{"#1 declaration only", "", ``, map[string]map[string]any{
			"safe_read":   canonical(nil, list("read")),
			"str_tags":    nil, // #7: malformed, no config: key removed
			"json_string": nil, // open point 8: a JSON string is malformed
			"not_object":  nil,
			"null_decl":   nil,
			"no_tags":     canonical(nil, nil), // valid, filtered field by field
			"plain":       nil,
		}},
		{"#2 default over the server", "", `,"default_tool_meta":{"tags":["default"]}`, map[string]map[string]any{
			"safe_read": canonical(nil, list("default")),
			"str_tags":  canonical(nil, list("default")), // #7: config canonical
			"plain":     canonical(nil, list("default")),
		}},
		{"#3 tool_meta over default", "", `,"default_tool_meta":{"tags":["default"]},"tool_meta":{"safe_read":{"tags":["specific"]}}`,
			map[string]map[string]any{"safe_read": canonical(nil, list("specific")), "plain": canonical(nil, list("default"))}},
		{"#4 empty tags clear", "", `,"default_tool_meta":{"tags":["default"]},"tool_meta":{"safe_read":{"tags":[]}}`,
			map[string]map[string]any{"safe_read": canonical(nil, list())}},
		{"#5 auto_apply only inherits server tags", "", `,"tool_meta":{"safe_read":{"auto_apply":true}}`,
			map[string]map[string]any{"safe_read": canonical(true, list("read"))}},
		{"#8 declaration and config", "", `,"tool_meta":{"safe_read":{"alias":"sr","ret_object_mapper":{"x":"y"}},"str_tags":{"tags":["cfg"]}}`,
			map[string]map[string]any{
				"sr":       {"auto_apply": nil, "alias": "sr", "ret_object_mapper": map[string]any{"x": "y"}, "tags": list("read")},
				"str_tags": canonical(nil, list("cfg")),
			}},
		{"#10 null tags inherit", "", `,"default_tool_meta":{"tags":["default"]},"tool_meta":{"safe_read":{"tags":null}}`,
			map[string]map[string]any{"safe_read": canonical(nil, list("default"))}},
		{"0.3.0 ignores declarations", "0.3.0", ``, map[string]map[string]any{
			"safe_read": nil, "no_tags": nil, "str_tags": nil, "plain": nil,
		}},
		{"0.3.1 config only", "0.3.1", `,"default_tool_meta":{"auto_apply":false}`, map[string]map[string]any{
			"safe_read": canonical(false, nil), "plain": canonical(false, nil),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fmt.Sprintf(`{"name":"Tag server","bundle_id":"tg","type":"streamable","server_parameters":{"url":%q}%s}`, url, tt.meta)
			a, _ := office(t, cfg, Options{ProtocolVersion: tt.version})
			waitTool(t, a, "tg__plain")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			tools, err := a.Tools(ctx, "pc")
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]smcp.SMCPTool{}
			for _, tl := range tools {
				byName[strings.TrimPrefix(tl.Name, "tg__")] = tl
			}
			if len(byName) != 7 {
				t.Fatalf("tools = %v; a declaration must never hide a tool", slices.Sorted(maps.Keys(byName)))
			}
			for name, want := range tt.want {
				tl, ok := byName[name]
				if !ok {
					t.Fatalf("%s not listed", name)
				}
				if got := parsedToolMeta(t, tl); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: a2c_tool_meta = %#v\nwant %#v", name, got, want)
				}
			}
			// Native keys are kept as they were.
			sr, ok := byName["safe_read"]
			if !ok {
				sr = byName["sr"]
			}
			if v := sr.Meta["custom_key"]; v != "v" {
				t.Errorf("safe_read custom_key = %#v", v)
			}
			if v := byName["str_tags"].Meta["custom_key"]; v != "w" {
				t.Errorf("str_tags custom_key = %#v", v)
			}
		})
	}
}

// TestServerAutoApplyIgnored: a server declaring auto_apply does not
// approve its own calls (conformance §2.6 #6): with --approve none the call
// is refused unless the configuration says auto_apply.
func TestServerAutoApplyIgnored(t *testing.T) {
	url := tagServer(t)
	cfg := fmt.Sprintf(`{"name":"tg","type":"streamable","server_parameters":{"url":%q},"tool_meta":{"plain":{"auto_apply":true}}}`, url)
	a, _ := office(t, cfg, Options{Approval: ApproveNone})
	waitTool(t, a, "tg__safe_read")
	ctx := context.Background()
	res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "tg__safe_read", Timeout: 5 * time.Second})
	if err != nil || res.ErrorCode() != smcp.CodeToolRequiresConfirmation {
		t.Fatalf("server-approved call = %+v, %v; want 4005", res, err)
	}
	res, err = a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "tg__plain", Timeout: 5 * time.Second})
	if err != nil || res.IsError {
		t.Fatalf("config-approved call = %+v, %v", res, err)
	}
}

// TestMalformedDeclarationWarnsOnce: the dropped declarations of one
// server make one warning naming the tools, not one per listing, and
// nothing of what they declared.
func TestMalformedDeclarationWarnsOnce(t *testing.T) {
	url := tagServer(t)
	var logs syncBuffer
	cfg := fmt.Sprintf(`{"name":"tg","type":"streamable","server_parameters":{"url":%q}}`, url)
	a, c := office(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitTool(t, a, "tg__plain")
	c.mu.Lock()
	c.rebuildLocked()
	c.rebuildLocked()
	c.mu.Unlock()
	out := logs.String()
	if n := strings.Count(out, "malformed a2c_tool_meta"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, out)
	}
	for _, tool := range []string{"str_tags", "json_string", "not_object"} {
		if !strings.Contains(out, tool) {
			t.Errorf("warning does not name %s:\n%s", tool, out)
		}
	}
	for _, value := range []string{`["read"]`, "[read]", "=read", `"read"`} {
		if strings.Contains(out, value) {
			t.Errorf("warning quotes a declared value (%s):\n%s", value, out)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestConfigPickOptions: client:get_config carries a pickString's options
// as {label, value} objects from 0.3.2 on and as plain values before,
// decided by the protocol version the Computer speaks.
func TestConfigPickOptions(t *testing.T) {
	const doc = `{"inputs": [
		{"type": "pickString", "id": "region", "description": "Region", "default": "eu",
		 "options": [{"label": "Europe", "value": "eu"}, {"label": "Europe (old)", "value": "eu"}, {"label": "US", "value": "us"}]},
		{"type": "promptString", "id": "pw", "password": true, "default": "PW-SECRET"}], "servers": {}}`
	objects := `[{"type":"pickString","id":"region","description":"Region","default":"eu","options":[{"label":"Europe","value":"eu"},{"label":"Europe (old)","value":"eu"},{"label":"US","value":"us"}]},` +
		`{"type":"promptString","id":"pw","description":"","password":true}]`
	values := `[{"type":"pickString","id":"region","description":"Region","default":"eu","options":["eu","eu","us"]},` +
		`{"type":"promptString","id":"pw","description":"","password":true}]`
	for _, tt := range []struct{ version, want string }{
		{"0.4.0", objects}, {"0.3.2", objects}, {"0.3.1", values}, {"0.3.0", values},
	} {
		t.Run(tt.version, func(t *testing.T) {
			cfg, err := config.Parse([]byte(doc), "x.json")
			if err != nil {
				t.Fatal(err)
			}
			c, err := New(Options{Server: "http://127.0.0.1:1", Office: "o", Name: "pc", Config: cfg, ProtocolVersion: tt.version})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := json.Marshal(c.configRet().Inputs)
			if err != nil || string(got) != tt.want {
				t.Fatalf("inputs = %s, %v\nwant     %s", got, err, tt.want)
			}
		})
	}
}

// stdioScript is a minimal MCP server over stdio (newline-delimited
// JSON-RPC) with two tools: "value" returns $VALUE, "pid" its process id.
const stdioScript = `import json, os, sys
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, res = msg.get("method"), None
    if method == "initialize":
        res = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
               "serverInfo": {"name": "py", "version": "1"}}
    elif method == "tools/list":
        res = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("value", "pid")]}
    elif method == "tools/call":
        name = msg["params"]["name"]
        res = {"content": [{"type": "text", "text": os.environ.get("VALUE", "") if name == "value" else str(os.getpid())}]}
    elif method == "ping":
        res = {}
    out = {"jsonrpc": "2.0", "id": msg["id"]}
    if res is None:
        out["error"] = {"code": -32601, "message": "unknown method"}
    else:
        out["result"] = res
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
`

// TestInputsReresolvedOnRestart runs the re-resolution vectors of the
// conformance tests (runtime contract §5.13) on a real stdio server whose
// environment holds a command input: ① the first start runs the command;
// ③ a running server keeps its value while the command's output changes;
// ② killed, it is restarted with the command run again (the new value, not
// a cached rendering); ⑥ a failed re-resolution leaves it in backoff with a
// structured error until a start succeeds, and a reload whose inputs fail
// keeps the running process.
func TestInputsReresolvedOnRestart(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 missing")
	}
	script := filepath.Join(t.TempDir(), "server.py")
	if err := os.WriteFile(script, []byte(stdioScript), 0o600); err != nil {
		t.Fatal(err)
	}
	var runs, ok atomic.Int32
	var fail atomic.Bool
	run := func(_ context.Context, command string, _ map[string]string) (string, error) {
		runs.Add(1)
		if command != "gen" {
			return "", fmt.Errorf("unexpected command %q", command)
		}
		if fail.Load() {
			return "", errors.New("exit status 3")
		}
		return fmt.Sprintf("v%d\n", ok.Add(1)), nil
	}
	inputs := []smcp.MCPServerInput{{Type: smcp.InputCommand, ID: "val", Command: "gen"}}
	doc := func(extra string) string {
		return fmt.Sprintf(`{"inputs": [{"type": "command", "id": "val", "command": "gen"}],
			"servers": {"py": {"type": "stdio", "server_parameters": {"command": %q, "args": ["-u", %q%s], "env": {"VALUE": "${input:val}"}}}}}`,
			python, script, extra)
	}
	var logs syncBuffer
	a, c := office(t, doc(""), Options{Resolver: &config.Resolver{Inputs: inputs, Env: func(string) (string, bool) { return "", false }, Run: run},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitTool(t, a, "py__value")

	call := func(tool string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: tool, Timeout: 12 * time.Second})
		if err != nil {
			return "", err
		}
		if res.IsError || len(res.Content) == 0 {
			return "", fmt.Errorf("%s: error result %+v", tool, res)
		}
		var item struct{ Text string }
		_ = json.Unmarshal(res.Content[0], &item)
		return item.Text, nil
	}
	must := func(tool string) string {
		t.Helper()
		v, err := call(tool)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	kill := func() int {
		t.Helper()
		pid, err := strconv.Atoi(must("py__pid"))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	waitValue := func(want string) {
		t.Helper()
		var got string
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got, err = call("py__value"); err == nil && got == want {
				return
			}
		}
		t.Fatalf("value = %q, %v; want %q", got, err, want)
	}

	// ① and ③.
	if v := must("py__value"); v != "v1" || runs.Load() != 1 {
		t.Fatalf("first start: value %q after %d runs", v, runs.Load())
	}
	if v := must("py__value"); v != "v1" || runs.Load() != 1 {
		t.Fatalf("running server re-resolved: value %q after %d runs", v, runs.Load())
	}

	// ②: the restarted process gets a fresh value.
	first := kill()
	waitValue("v2")
	if runs.Load() != 2 {
		t.Errorf("runs = %d after one restart, want 2", runs.Load())
	}
	if pid := must("py__pid"); pid == strconv.Itoa(first) {
		t.Error("the process was not restarted")
	}

	// ⑥: a restart whose command fails backs off with the error, and the
	// next successful resolution starts it.
	fail.Store(true)
	kill()
	up := func() *mcphost.Upstream {
		c.mu.RLock()
		defer c.mu.RUnlock()
		return c.servers["py"].up
	}
	var ce *config.Error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := up().State(); st == mcphost.Backoff && errors.As(err, &ce) {
			break
		}
		if time.Now().After(deadline) {
			st, err := up().State()
			t.Fatalf("state = %s, %v; want backoff with a *config.Error", st, err)
		}
	}
	if ce.Input != "val" || ce.Server != "py" || !strings.Contains(ce.Error(), "exit status 3") {
		t.Errorf("error = %#v", ce)
	}
	if !strings.Contains(logs.String(), "mcp server inputs could not be resolved") {
		t.Errorf("the failure was not logged:\n%s", logs.String())
	}
	fail.Store(false)
	waitValue("v3")

	// ⑥ on reload: a changed server whose inputs fail keeps running as it was.
	pid := must("py__pid")
	fail.Store(true)
	cfg, err := config.Parse([]byte(doc(`, "changed"`)), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	rerr := c.Reload(context.Background(), cfg)
	if !errors.As(rerr, &ce) || ce.Input != "val" {
		t.Fatalf("Reload = %v; want the input's error", rerr)
	}
	if got := must("py__pid"); got != pid {
		t.Errorf("pid %s after the failed reload, want the running %s", got, pid)
	}
	if v := must("py__value"); v != "v3" {
		t.Errorf("value %q after the failed reload, want v3", v)
	}
}
