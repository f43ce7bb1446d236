package a2c

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// extServer is an MCP server (official Go SDK, streamable HTTP) with two
// window:// resources and a tool whose result is a 3 MB image.
func extServer(t *testing.T, image []byte) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "ext", Version: "1"}, nil)
	for uri, w := range map[string]struct {
		text     string
		priority float64
	}{"window://editor/main.go": {"package main", 0.4}, "window://editor/README": {"read me", 0.8}} {
		s.AddResource(&mcp.Resource{URI: uri, Name: uri, Annotations: &mcp.Annotations{Priority: w.priority}},
			func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: w.text}}}, nil
			})
	}
	mcp.AddTool(s, &mcp.Tool{Name: "screenshot"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: image, MIMEType: "image/png"}}}, struct{}{}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestComputerDesktopAndBlob runs the real binaries: get_desktop over a
// window server, and a large binary tool result fetched through get_blob
// with its sha256 verified.
func TestComputerDesktopAndBlob(t *testing.T) {
	image := bytes.Repeat([]byte("\x89PNG\r\n\x1a\n"), 3<<17) // 3 MB
	url := extServer(t, image)
	srv := startServer(t)
	cfg := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"name":"ext","type":"streamable","server_parameters":{"url":%q}}`, url)), 0o600); err != nil {
		t.Fatal(err)
	}
	office := agent.NewReqID()
	startComputer(t, srv.URL, office, "pc", cfg)
	a := dialAgent(t, srv.URL, "agent", agent.Options{})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	waitTools(t, a, "pc", "ext__screenshot")

	want := []string{"window://editor/README\n\nread me", "window://editor/main.go\n\npackage main"}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var err error
		if got, err = a.Desktop(ctx10(t), "pc", nil, ""); err == nil && slices.Equal(got, want) {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("desktop = %q, want %q", got, want)
	}

	res, err := a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "ext__screenshot", Timeout: 20 * time.Second})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("result = %+v, %v", res, err)
	}
	var item struct {
		Data string         `json:"data"`
		Meta map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(res.Content[0], &item)
	handle, _ := item.Meta[smcp.MetaBlobHandle].(string)
	if item.Data != "" || handle == "" || item.Meta[smcp.MetaTotalSize] != float64(len(image)) {
		t.Fatalf("item = %s", res.Content[0])
	}
	data, meta, err := a.Blob(ctx10(t), "pc", handle, 0)
	if err != nil || !bytes.Equal(data, image) || meta.SHA256 != item.Meta[smcp.MetaSHA256] {
		t.Fatalf("blob: %d bytes, %v", len(data), err)
	}
}
