package computer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/computer/config"
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
// returns an Agent joined to the Computer's office.
func office(t *testing.T, cfgJSON string, o Options, ao ...agent.Options) (*agent.Client, *Computer) {
	t.Helper()
	srv, err := server.New(server.Config{})
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
