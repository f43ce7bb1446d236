package a2c

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// computer is a scripted Computer peer: it joins an office and answers
// client:* requests with reply (or never, when reply returns false).
type computer struct {
	t      *testing.T
	sock   *sio.Socket
	mu     sync.Mutex
	events []*sio.Event
	reply  func(e *sio.Event) (any, bool)
}

func (c *computer) Event(_ *sio.Socket, e *sio.Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
	if c.reply == nil {
		return
	}
	if v, ok := c.reply(e); ok {
		b, _ := json.Marshal(v)
		_ = e.Ack(sio.Message{Args: []json.RawMessage{b}})
	}
}

func (c *computer) Disconnect(*sio.Socket, string) {}

// received returns the events seen so far with the given name.
func (c *computer) received(name string) []*sio.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*sio.Event
	for _, e := range c.events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func dialComputer(t *testing.T, serverURL, office, name string, reply func(*sio.Event) (any, bool)) *computer {
	t.Helper()
	return dialComputerWith(t, serverURL, office, name, reply, nil)
}

// dialComputerWith is dialComputer presenting auth (nil: none) in the
// connect auth object.
func dialComputerWith(t *testing.T, serverURL, office, name string, reply func(*sio.Event) (any, bool), auth any) *computer {
	t.Helper()
	c := &computer{t: t, reply: reply}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sio.Dial(ctx, serverURL, sio.ClientOptions{
		Namespace: smcp.Namespace,
		Query:     url.Values{smcp.QueryVersion: {smcp.ProtocolVersion}},
		Auth:      auth,
		Handler:   c,
	})
	if err != nil {
		t.Fatalf("computer dial: %v", err)
	}
	c.sock = s
	t.Cleanup(s.Disconnect)
	b, _ := json.Marshal(smcp.EnterOfficeReq{Role: smcp.RoleComputer, Name: name, OfficeID: office})
	done := make(chan sio.Message, 1)
	s.Request(smcp.EventJoinOffice, sio.Message{Args: []json.RawMessage{b}}, 5*time.Second, func(m sio.Message, err error) {
		if err != nil {
			t.Errorf("computer join: %v", err)
		}
		done <- m
	})
	if m := <-done; len(m.Args) != 2 || string(m.Args[0]) != "true" || string(m.Args[1]) != "null" {
		t.Fatalf("computer join ack = %q", m.Args)
	}
	return c
}

func dialAgent(t *testing.T, serverURL, name string, o agent.Options) *agent.Client {
	t.Helper()
	o.Name = name
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := agent.Dial(ctx, serverURL, o)
	if err != nil {
		t.Fatalf("agent dial: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// ctx10 is the deadline of one step (20 s, cancelled when t ends). Take
// a fresh one per step: a context shared by a whole test lets one slow
// step starve the steps after it.
func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// echoComputer answers every client:* request the way a real Computer
// would, with fixed data.
func echoComputer(blob []byte) func(e *sio.Event) (any, bool) {
	sum := sha256.Sum256(blob)
	return func(e *sio.Event) (any, bool) {
		var req map[string]any
		_ = json.Unmarshal(e.Args[0], &req)
		switch e.Name {
		case smcp.EventToolCall:
			if req["tool_name"] == "b__never" {
				return nil, false
			}
			return map[string]any{"content": []any{map[string]any{"type": "text", "text": "echo"}}, "isError": false,
				"meta": map[string]any{"params": req["params"]}, "structuredContent": map[string]any{"k": "é"}}, true
		case smcp.EventGetTools:
			return map[string]any{"req_id": req["req_id"], "tools": []any{map[string]any{"name": "b__echo", "bundle_id": "b",
				"description": "Echo", "params_schema": map[string]any{"type": "object"}, "return_schema": nil,
				"meta": map[string]any{"a2c_tool_meta": `{"auto_apply": true}`}}}}, true
		case smcp.EventGetConfig:
			return map[string]any{"servers": map[string]any{"b": map[string]any{"name": "b", "type": "stdio"}}, "inputs": nil}, true
		case smcp.EventGetDesktop:
			return map[string]any{"req_id": req["req_id"], "desktops": []string{"window://a/1\n\nhello"}}, true
		case smcp.EventGetResources:
			return smcp.MCPServerNotFound(req["mcp_server"].(string)), true
		case smcp.EventGetSkills:
			return map[string]any{"req_id": req["req_id"], "skills": []any{map[string]any{"name": "s", "source": "user", "path": "/x", "description": "d"}}}, true
		case smcp.EventGetSkill:
			return map[string]any{"req_id": req["req_id"], "name": "s", "rel_path": "SKILL.md", "mime_type": "text/markdown",
				"total_size": 2, "sha256": "x", "body": "hi"}, true
		case smcp.EventGetBlob:
			off := int64(req["chunk_offset"].(float64))
			n := int64(req["max_chunk_bytes"].(float64))
			end := min(off+n, int64(len(blob)))
			return smcp.GetBlobRet{BlobHandle: req["blob_handle"].(string), MimeType: "application/octet-stream",
				TotalSize: int64(len(blob)), SHA256: hex.EncodeToString(sum[:]), ChunkOffset: off,
				EOF: end == int64(len(blob)), Blob: base64.StdEncoding.EncodeToString(blob[off:end]), ReqID: req["req_id"].(string)}, true
		}
		return nil, false
	}
}

func TestGoAgent(t *testing.T) {
	srv := startServer(t)
	office := agent.NewReqID()
	blob := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	comp := dialComputer(t, srv.URL, office, "c1", echoComputer(blob))

	var notes sync.Map
	a := dialAgent(t, srv.URL, "agent-1", agent.Options{OnNotify: func(n agent.Notification) { notes.Store(n.Event+":"+n.Computer, n) }})

	t.Run("not-in-office-4103", func(t *testing.T) {
		ctx := ctx10(t)
		_, err := a.Tools(ctx, "c1")
		if !errors.Is(err, &smcp.Error{Code: smcp.CodeNotInRoom}) {
			t.Fatalf("err = %v", err)
		}
	})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	t.Run("second-agent-refused", func(t *testing.T) {
		ctx := ctx10(t)
		b := dialAgent(t, srv.URL, "agent-2", agent.Options{})
		var je *agent.JoinError
		if err := b.Join(ctx, office); !errors.As(err, &je) || je.Message != "Room already has an agent" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("tool-call-relayed", func(t *testing.T) {
		ctx := ctx10(t)
		res, err := a.CallTool(ctx, agent.Call{Computer: "c1", Tool: "b__echo", Params: map[string]any{"x": 1}, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || string(res.Content[0]) != `{"text":"echo","type":"text"}` || string(res.StructuredContent) != `{"k":"é"}` {
			t.Fatalf("result = %+v", res)
		}
		calls := comp.received(smcp.EventToolCall)
		var req smcp.ToolCallReq
		_ = json.Unmarshal(calls[len(calls)-1].Args[0], &req)
		if req.Agent != "agent-1" || req.Computer != "c1" || req.ToolName != "b__echo" || string(req.Params) != `{"x":1}` || req.Timeout != 5 {
			t.Fatalf("computer got %+v", req)
		}
	})
	t.Run("get-routes", func(t *testing.T) {
		ctx := ctx10(t)
		tools, err := a.Tools(ctx, "c1")
		if err != nil || len(tools) != 1 || tools[0].Name != "b__echo" || tools[0].BundleID != "b" {
			t.Fatalf("tools = %+v, %v", tools, err)
		}
		cfg, err := a.Config(ctx, "c1")
		if err != nil || len(cfg.Servers) != 1 {
			t.Fatalf("config = %+v, %v", cfg, err)
		}
		d, err := a.Desktop(ctx, "c1", nil, "")
		if err != nil || len(d) != 1 || d[0] != "window://a/1\n\nhello" {
			t.Fatalf("desktop = %q, %v", d, err)
		}
		_, err = a.Resources(ctx, "c1", "nope", nil)
		var pe *smcp.Error
		if !errors.As(err, &pe) || pe.Code != smcp.CodeMCPServerNotFound || pe.MCPServer != "nope" {
			t.Fatalf("resources err = %#v", err)
		}
		sk, err := a.Skills(ctx, "c1")
		if err != nil || len(sk) != 1 || sk[0].Name != "s" {
			t.Fatalf("skills = %+v, %v", sk, err)
		}
		one, err := a.Skill(ctx, "c1", "s", "")
		if err != nil || one.Body == nil || *one.Body != "hi" {
			t.Fatalf("skill = %+v, %v", one, err)
		}
		data, meta, err := a.Blob(ctx, "c1", "opaque-handle", 4096)
		if err != nil || !bytes.Equal(data, blob) || meta.TotalSize != int64(len(blob)) {
			t.Fatalf("blob: %d bytes, %v", len(data), err)
		}
		if n := len(comp.received(smcp.EventGetBlob)); n != 4 {
			t.Fatalf("blob read in %d chunks, want 4", n)
		}
	})
	t.Run("unknown-computer-404", func(t *testing.T) {
		ctx := ctx10(t)
		_, err := a.Tools(ctx, "nobody")
		if !errors.Is(err, &smcp.Error{Code: smcp.CodeNotFound}) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("cross-office-4104", func(t *testing.T) {
		ctx := ctx10(t)
		dialComputer(t, srv.URL, agent.NewReqID(), "elsewhere", nil)
		_, err := a.Tools(ctx, "elsewhere")
		if !errors.Is(err, &smcp.Error{Code: smcp.CodeCrossRoom}) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("list-room", func(t *testing.T) {
		ctx := ctx10(t)
		ss, err := a.ListRoom(ctx)
		if err != nil || len(ss) != 2 || ss[0].Name != "agent-1" || ss[0].Role != smcp.RoleAgent || ss[1].Name != "c1" ||
			ss[1].OfficeID != office || ss[1].A2CVersion != smcp.ProtocolVersion {
			t.Fatalf("sessions = %+v, %v", ss, err)
		}
	})
	t.Run("notify-enter", func(t *testing.T) {
		dialComputer(t, srv.URL, office, "c2", nil)
		waitFor(t, "notify:enter_office for c2", func() bool {
			_, ok := notes.Load(smcp.NotifyEnterOffice + ":c2")
			return ok
		})
		if v, _ := notes.Load(smcp.NotifyEnterOffice + ":c2"); v.(agent.Notification).OfficeID != office {
			t.Fatalf("notification %+v", v)
		}
	})
	t.Run("cancel-via-context", func(t *testing.T) {
		ctx := ctx10(t)
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := a.CallTool(cctx, agent.Call{Computer: "c1", Tool: "b__never", Timeout: 30 * time.Second, ReqID: "req-cancel-1"})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		waitFor(t, "notify:tool_call_cancel at the computer", func() bool {
			for _, e := range comp.received(smcp.NotifyCancelToolCall) {
				if string(e.Args[0]) == `{"agent":"agent-1","req_id":"req-cancel-1"}` {
					return true
				}
			}
			return false
		})
	})
	t.Run("server-deadline", func(t *testing.T) {
		ctx := ctx10(t)
		res, err := a.CallTool(ctx, agent.Call{Computer: "c1", Tool: "b__never", Timeout: time.Second})
		if err != nil || !res.IsError || !res.Timeout() {
			t.Fatalf("result = %+v, %v", res, err)
		}
	})
}

func TestGoAgentVersionAndAuth(t *testing.T) {
	// The gate both ways: the default (0.4.0) Agent at a 0.3.0 server, and
	// a 0.3.0 Agent at a default (0.4.0) server; each refusal names the
	// server's version and the MAJOR.MINOR range it admits.
	old := startServer(t, "--protocol-version", "0.3.0")
	cur := startServer(t)
	for _, tc := range []struct {
		url, client, server, lo, hi string
	}{
		{old.URL, smcp.ProtocolVersion, "0.3.0", "0.3.0", "0.3.999"},
		{cur.URL, "0.3.0", smcp.ProtocolVersion, "0.4.0", "0.4.999"},
	} {
		for _, wsOnly := range []bool{false, true} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := agent.Dial(ctx, tc.url, agent.Options{Name: "a", WebSocketOnly: wsOnly, ProtocolVersion: tc.client})
			cancel()
			var pve *agent.ProtocolVersionError
			if !errors.As(err, &pve) || pve.Code != 4008 || pve.ServerVersion != tc.server || pve.ClientVersion != tc.client ||
				pve.MinSupported != tc.lo || pve.MaxSupported != tc.hi {
				t.Fatalf("client %s at server %s, websocket-only=%v: err = %#v", tc.client, tc.server, wsOnly, err)
			}
		}
	}
	// The same version on both sides is admitted.
	a03 := dialAgent(t, old.URL, "a", agent.Options{ProtocolVersion: "0.3.0"})
	if err := a03.Join(ctx10(t), "o"); err != nil {
		t.Fatalf("0.3.0 agent at a 0.3.0 server: %v", err)
	}
	auth := startServer(t, "--token", "tok")
	_, err := agent.Dial(ctx10(t), auth.URL, agent.Options{Name: "a"})
	var ce *agent.ConnectError
	if !errors.As(err, &ce) || ce.Message != "unauthorized" {
		t.Fatalf("no token: err = %#v", err)
	}
	waitFor(t, "auth failure logged at WARN", func() bool {
		return strings.Contains(auth.Logs(), `level=WARN msg="authentication failed"`)
	})
	if strings.Contains(auth.Logs(), "tok") {
		t.Fatalf("the secret reached the log:\n%s", auth.Logs())
	}
	a := dialAgent(t, auth.URL, "a", agent.Options{Auth: map[string]any{"x-api-key": "tok"}})
	if err := a.Join(ctx10(t), "o"); err != nil {
		t.Fatal(err)
	}
	b := dialAgent(t, auth.URL, "b", agent.Options{Header: map[string][]string{"Authorization": {"Bearer tok"}}})
	if err := b.Join(ctx10(t), "o2"); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
