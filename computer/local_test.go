package computer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// localImage is an image over the inline budget TestLocalServer sets
// (small, so that the race detector under load copes).
var localImage = bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 4<<10)

// localServer is an MCP server of this process, reached through in-memory
// transports as aiod's sandbox tools are: "add", "wait" (until its context
// ends, reporting that on ended) and "big-image".
type localServer struct {
	srv      *mcp.Server
	connects atomic.Int32
	ended    chan string // the wait handler's ctx error, when it ends early
}

func newLocalServer() *localServer {
	l := &localServer{srv: mcp.NewServer(&mcp.Implementation{Name: "local", Version: "1"}, nil), ended: make(chan string, 4)}
	type in struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	type out struct {
		Sum int `json:"sum"`
	}
	mcp.AddTool(l.srv, &mcp.Tool{Name: "add", Description: "Adds"}, func(_ context.Context, _ *mcp.CallToolRequest, x in) (*mcp.CallToolResult, out, error) {
		return nil, out{x.A + x.B}, nil
	})
	mcp.AddTool(l.srv, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		select { // bounded, so that a lost cancel cannot hang the test
		case <-ctx.Done():
			l.ended <- ctx.Err().Error()
		case <-time.After(10 * time.Second):
		}
		return nil, struct{}{}, ctx.Err()
	})
	mcp.AddTool(l.srv, &mcp.Tool{Name: "big-image"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: localImage, MIMEType: "image/png"}}}, struct{}{}, nil
	})
	return l
}

func (l *localServer) Connect(ctx context.Context) (mcp.Transport, error) {
	l.connects.Add(1)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := l.srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { ss.Close() })
	return ct, nil
}

// localOffice is an office whose Computer hosts l as bundle "mem" beside
// the servers of cfgJSON.
func localOffice(t *testing.T, l *localServer, cfgJSON string, o Options) (*agent.Client, *Computer) {
	t.Helper()
	o.Local = []LocalServer{{BundleID: "mem", Name: "In-process", Connect: l.Connect}}
	return office(t, cfgJSON, o)
}

func TestLocalServer(t *testing.T) {
	up := upstream(t)
	cfg := fmt.Sprintf(`{"name":"up","type":"streamable","server_parameters":{"url":%q}}`, up)
	l := newLocalServer()
	joined := make(chan struct{}, 4)
	a, c := localOffice(t, l, cfg, Options{InlineBudget: 1 << 10, OnJoined: func() { joined <- struct{}{} }})
	select {
	case <-joined:
	case <-time.After(10 * time.Second):
		t.Fatal("OnJoined never called")
	}
	ctx := context.Background()

	t.Run("listed-at-join", func(t *testing.T) {
		// Run waited for the local server: its tools are there from the
		// first get_tools, before the configured server's may be.
		tools, err := a.Tools(ctx, "pc")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools {
			if tl.BundleID == "mem" {
				names = append(names, tl.Name)
			}
		}
		if strings.Join(names, ",") != "mem__add,mem__big-image,mem__wait" {
			t.Fatalf("local tools = %v", names)
		}
		waitTool(t, a, "up__echo")
	})
	t.Run("config", func(t *testing.T) {
		ret, err := a.Config(ctx, "pc")
		if err != nil {
			t.Fatal(err)
		}
		if got := string(ret.Servers["mem"]); got != `{"name":"In-process","bundle_id":"mem","type":"memory","disabled":false,"forbidden_tools":[],"tool_meta":{},"server_parameters":{}}` {
			t.Fatalf("get_config mem = %s", got)
		}
		if _, ok := ret.Servers["up"]; !ok || len(ret.Servers) != 2 {
			t.Fatalf("get_config servers = %v", ret.Servers)
		}
	})
	t.Run("call", func(t *testing.T) {
		res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "mem__add", Params: map[string]int{"a": 2, "b": 40}, Timeout: 5 * time.Second})
		if err != nil || res.IsError || string(res.StructuredContent) != `{"sum":42}` {
			t.Fatalf("mem__add = %+v, %v", res, err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		id := agent.NewReqID()
		done := make(chan *smcp.CallToolResult, 1)
		go func() {
			res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "mem__wait", Timeout: 30 * time.Second, ReqID: id})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		waitInflight(t, c, id)
		start := time.Now()
		if err := a.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-l.ended:
			if e != context.Canceled.Error() {
				t.Errorf("server handler ended with %s", e)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("the cancel never reached the in-process server")
		}
		res := <-done
		if res == nil || !res.IsError || !res.Cancelled() || time.Since(start) > 2*time.Second {
			t.Fatalf("cancelled call = %+v after %v", res, time.Since(start))
		}
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "mem__wait", Timeout: time.Second})
		if err != nil || !res.IsError || !res.Timeout() || res.Cancelled() {
			t.Fatalf("timed-out call = %+v, %v", res, err)
		}
		if d := time.Since(start); d < time.Second || d > 3*time.Second {
			t.Errorf("timed out after %v, want about 1s", d)
		}
		select {
		case <-l.ended:
		case <-time.After(2 * time.Second):
			t.Fatal("the timeout never reached the in-process server")
		}
	})
	t.Run("blob", func(t *testing.T) {
		res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "mem__big-image", Timeout: 10 * time.Second})
		if err != nil || res.IsError || len(res.Content) != 1 {
			t.Fatalf("result = %+v, %v", res, err)
		}
		var item struct {
			Data string         `json:"data"`
			Meta map[string]any `json:"_meta"`
		}
		_ = json.Unmarshal(res.Content[0], &item)
		handle, _ := item.Meta[smcp.MetaBlobHandle].(string)
		if item.Data != "" || handle == "" {
			t.Fatalf("not offloaded: %v", item.Meta)
		}
		data, _, err := a.Blob(ctx, "pc", handle, 0)
		if err != nil || !bytes.Equal(data, localImage) {
			t.Fatalf("blob: %d bytes, %v", len(data), err)
		}
	})
	t.Run("history", func(t *testing.T) {
		var outcomes []string
		for _, r := range c.History() {
			if r.BundleID == "mem" {
				outcomes = append(outcomes, r.Tool+":"+r.Outcome)
			}
		}
		if strings.Join(outcomes, ",") != "mem__add:ok,mem__wait:cancelled,mem__wait:timeout,mem__big-image:ok" {
			t.Fatalf("history = %v", outcomes)
		}
	})
	t.Run("kept-across-reload", func(t *testing.T) {
		before := l.connects.Load()
		// The new configuration drops "up" and names a server "mem" too:
		// the local server keeps its name and its session.
		next, err := config.Parse([]byte(`{"name":"mem","type":"streamable","server_parameters":{"url":"http://127.0.0.1:1/mcp"}}`), "next.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Reload(ctx, next); err != nil {
			t.Fatal(err)
		}
		res, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "mem__add", Params: map[string]int{"a": 1, "b": 1}, Timeout: 5 * time.Second})
		if err != nil || res.IsError || string(res.StructuredContent) != `{"sum":2}` {
			t.Fatalf("mem__add after reload = %+v, %v", res, err)
		}
		if n := l.connects.Load(); n != before {
			t.Errorf("the local server was reconnected by the reload (%d connects, was %d)", n, before)
		}
		st := c.Status()
		if len(st.Servers) != 1 || st.Servers[0].BundleID != "mem" || st.Servers[0].Type != "memory" || st.Servers[0].State != "ready" {
			t.Fatalf("status = %+v", st.Servers)
		}
	})
}

func TestLocalApprovalNone(t *testing.T) {
	a, _ := localOffice(t, newLocalServer(), `[]`, Options{Approval: ApproveNone})
	waitTool(t, a, "mem__add")
	res, err := a.CallTool(context.Background(), agent.Call{Computer: "pc", Tool: "mem__add", Timeout: 5 * time.Second})
	if err != nil || res.ErrorCode() != smcp.CodeToolRequiresConfirmation {
		t.Fatalf("result = %+v, %v", res, err)
	}
}

func TestLocalOptionsRefused(t *testing.T) {
	connect := newLocalServer().Connect
	for _, tc := range []struct {
		name  string
		local []LocalServer
		want  string
	}{
		{"bad-bundle-id", []LocalServer{{BundleID: "a__b", Connect: connect}}, `invalid bundle_id "a__b"`},
		{"empty-bundle-id", []LocalServer{{Connect: connect}}, `invalid bundle_id ""`},
		{"no-connect", []LocalServer{{BundleID: "x"}}, `"x" has no Connect`},
		{"duplicate", []LocalServer{{BundleID: "x", Connect: connect}, {BundleID: "x", Connect: connect}}, `two local servers named "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{Server: "http://127.0.0.1:1", Office: "o", Name: "pc", Local: tc.local})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
		})
	}
}

// waitInflight waits until the Computer runs the call with reqID.
func waitInflight(t *testing.T, c *Computer, reqID string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c.mu.RLock()
		_, ok := c.inflight[reqID]
		c.mu.RUnlock()
		if ok {
			return
		}
	}
	t.Fatalf("call %s never started", reqID)
}

// TestLocalServerTags: an in-process server's tags declaration crosses the
// in-memory transport like any other, and a local server (no
// configuration layer) publishes it tags-only; a tool without a
// declaration has no a2c_tool_meta at all.
func TestLocalServerTags(t *testing.T) {
	l := newLocalServer()
	mcp.AddTool(l.srv, &mcp.Tool{Name: "tagged", Meta: mcp.Meta{"a2c_tool_meta": map[string]any{"tags": []string{"sandbox", "fs"}, "auto_apply": true}}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
			return nil, struct{}{}, nil
		})
	a, _ := localOffice(t, l, `[]`, Options{})
	waitTool(t, a, "mem__tagged")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tools, err := a.Tools(ctx, "pc")
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		got := parsedToolMeta(t, tl)
		switch tl.Name {
		case "mem__tagged":
			want := map[string]any{"auto_apply": nil, "alias": nil, "ret_object_mapper": nil, "tags": []any{"sandbox", "fs"}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("tagged: a2c_tool_meta = %#v", got)
			}
		default:
			if got != nil {
				t.Errorf("%s: a2c_tool_meta = %#v, want none", tl.Name, got)
			}
		}
	}
}
