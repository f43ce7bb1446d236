package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/computer"
)

func TestValidToolName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"t__echo", true},
		{"c1.t__echo", true},
		{"a-b_c.D9", true},
		{"", false},
		{strings.Repeat("x", 128), true},
		{strings.Repeat("x", 129), false},
		{"with space", false},
		{"slash/name", false},
		{"ümlaut", false},
	} {
		if got := validToolName(c.name); got != c.ok {
			t.Errorf("validToolName(%q) = %v", c.name, got)
		}
	}
}

func TestInputSchema(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"type":"object","properties":{"a":{}}}`, `{"type":"object","properties":{"a":{}}}`},
		{`{"type":"string"}`, `{"type":"object"}`},
		{`{}`, `{"type":"object"}`},
		{`null`, `{"type":"object"}`},
		{``, `{"type":"object"}`},
		{`[1]`, `{"type":"object"}`},
		{`{"type":["object"]}`, `{"type":"object"}`},
	} {
		if got := string(inputSchema(json.RawMessage(c.in))); got != c.want {
			t.Errorf("inputSchema(%s) = %s", c.in, got)
		}
	}
}

// TestMapResult: a Computer's CallToolResult becomes MCP's, its markers
// in _meta; an answer that is no tool result is a failed call (4003).
func TestMapResult(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     string // the MCP result's JSON
		code     int
	}{
		{"text", `{"content":[{"type":"text","text":"hi"}],"isError":false}`,
			`{"content":[{"type":"text","text":"hi"}]}`, 0},
		{"structured", `{"content":[],"structuredContent":{"a":1},"isError":false}`,
			`{"content":[],"structuredContent":{"a":1}}`, 0},
		{"timeout marker", `{"content":[{"type":"text","text":"Tool call timed out"}],"isError":true,"meta":{"a2c_timeout":true}}`,
			`{"_meta":{"a2c_timeout":true},"content":[{"type":"text","text":"Tool call timed out"}],"isError":true}`, 0},
		{"error code", `{"content":[{"type":"text","text":"no"}],"isError":true,"meta":{"error_code":4005,"mcp_server":"b"}}`,
			`{"_meta":{"error_code":4005,"mcp_server":"b"},"content":[{"type":"text","text":"no"}],"isError":true}`, 4005},
		{"image", `{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}],"isError":false}`,
			`{"content":[{"type":"image","mimeType":"image/png","data":"aGk="}]}`, 0},
		{"unknown content kept as text", `{"content":[{"type":"hologram","x":1}],"isError":false}`,
			`{"content":[{"type":"text","text":"{\"type\":\"hologram\",\"x\":1}"}]}`, 0},
		{"no content", `{"isError":false}`, `{"content":[]}`, 0},
		{"audio, link, embedded", `{"content":[{"type":"audio","data":"aGk=","mimeType":"audio/wav"},` +
			`{"type":"resource_link","uri":"file:///a","name":"a","size":3},` +
			`{"type":"resource","resource":{"uri":"x://y","mimeType":"text/plain","text":"t"},"annotations":{"priority":0.5}}]}`,
			`{"content":[{"type":"audio","mimeType":"audio/wav","data":"aGk="},{"type":"resource_link","uri":"file:///a","name":"a","size":3},` +
				`{"type":"resource","resource":{"uri":"x://y","mimeType":"text/plain","text":"t"},"annotations":{"priority":0.5}}]}`, 0},
		{"text without text", `{"content":[{"type":"text"}]}`, `{"content":[{"type":"text","text":"{\"type\":\"text\"}"}]}`, 0},
		{"not a result", `[1,2]`,
			`{"_meta":{"error_code":4003},"content":[{"type":"text","text":"The Computer's answer is no tool result."}],"isError":true}`, 4003},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := mapResult(json.RawMessage(c.in))
			got, err := json.Marshal(out)
			if err != nil || string(got) != c.want || code != c.code {
				t.Errorf("got %s (code %d, %v)\nwant %s (code %d)", got, code, err, c.want, c.code)
			}
		})
	}
}

func TestNewEra(t *testing.T) {
	for _, c := range []struct {
		name, header, body string
		want               bool
	}{
		{"header 2026", "2026-07-28", `{}`, true},
		{"header later", "2027-01-01", `{}`, true},
		{"header 2025", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, false},
		{"discover", "", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, true},
		{"meta", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, true},
		{"meta earlier", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`, false},
		{"initialize", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, false},
		{"batch", "", `[{"jsonrpc":"2.0","id":1,"method":"server/discover"}]`, false},
		{"not json", "", `{`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", "/mcp", strings.NewReader(c.body))
			if c.header != "" {
				r.Header.Set("Mcp-Protocol-Version", c.header)
			}
			got, err := newEra(r)
			if err != nil || got != c.want {
				t.Fatalf("newEra = %v, %v", got, err)
			}
			if c.header == "" { // the body was read: it must be put back whole
				b := make([]byte, len(c.body)+1)
				n, _ := r.Body.Read(b)
				if string(b[:n]) != c.body {
					t.Errorf("body put back as %q", b[:n])
				}
			}
		})
	}
}

// FuzzMapResult: whatever a Computer answers, the mapping neither panics
// nor makes a result that does not encode.
func FuzzMapResult(f *testing.F) {
	f.Add(`{"content":[{"type":"text","text":"hi"}],"isError":false,"meta":{"error_code":4005}}`)
	f.Add(`{"content":[{"type":"resource","resource":{"uri":"x://y","text":"t"}}]}`)
	f.Add(`{"structuredContent":null,"meta":{"error_code":"x"}}`)
	f.Fuzz(func(t *testing.T, in string) {
		out, _ := mapResult(json.RawMessage(in))
		if out == nil || out.Content == nil {
			t.Fatal("no result")
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("the result does not encode: %v", err)
		}
		var back sdk.CallToolResult
		b, _ := json.Marshal(out)
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("an MCP client cannot read the result %s: %v", b, err)
		}
	})
}

// TestFastPathSameBytes: the fast path answers a 2026-07-28 tools/call
// with the bytes the SDK writes for it (status, Content-Type, body), for
// results of every shape; and what it does not take, the SDK answers.
func TestFastPathSameBytes(t *testing.T) {
	r := newRig(t, "", 10*time.Second)
	tools := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	tools.AddTool(&sdk.Tool{Name: "text", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a <b> & \"c\" \u2028 é"}}}, nil
	})
	tools.AddTool(&sdk.Tool{Name: "fails", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no"}}}, nil
	})
	tools.AddTool(&sdk.Tool{Name: "structured", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: []byte("png"), MIMEType: "image/png"}}, StructuredContent: map[string]any{"k": []int{1, 2}}}, nil
	})
	r.computer(t, "o1", "c1", computer.ApproveAll, tools)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"},"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`
	post := func(name, id, extra string) (int, string, string) {
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `","arguments":{"x":1},` + meta + extra + `}}`
		req, _ := http.NewRequest("POST", r.base+"/offices/o1/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", name)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	for _, c := range []struct{ name, id, extra string }{
		{"t__text", `7`, ""},
		{"t__text", `"req-1:a.b_c"`, ""},
		{"t__fails", `-3`, ""},
		{"t__structured", `12`, ""},
		{"t__nope", `1`, ""},                   // not listed: the SDK's -32602
		{"t__text", `1.5`, ""},                 // not a plain id: the SDK
		{"t__text", `"\u0041"`, ""},            // an id the SDK re-encodes
		{"t__text", `1`, `,"requestState":""`}, // a key the fast path leaves to the SDK
	} {
		r.gw.slowOnly.Store(false)
		fs, fct, fb := post(c.name, c.id, c.extra)
		r.gw.slowOnly.Store(true)
		ss, sct, sb := post(c.name, c.id, c.extra)
		r.gw.slowOnly.Store(false)
		if fs != ss || fct != sct || fb != sb {
			t.Errorf("%s id %s:\nfast %d %s %s\nSDK  %d %s %s", c.name, c.id, fs, fct, fb, ss, sct, sb)
		}
	}
}

// TestFastSessionSameBytes: in a handshake-era session the fast path
// answers a tools/call with the SDK's bytes, and a cancel naming it ends
// it; what it does not take, the SDK answers.
func TestFastSessionSameBytes(t *testing.T) {
	r := newRig(t, "", 10*time.Second)
	started := make(pids, 1)
	r.computer(t, "o1", "c1", computer.ApproveAll, testTools(started))
	post := func(sid, version, body string) (int, string, string, string) {
		req, _ := http.NewRequest("POST", r.base+"/offices/o1/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Mcp-Session-Id"), string(b)
	}
	for _, version := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
		_, _, sid, _ := post("", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
		if sid == "" {
			t.Fatal("no session")
		}
		post(sid, version, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		for _, c := range []struct {
			body string
			fast bool
		}{
			{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__echo","arguments":{"text":"<a&b>"}}}`, true},
			{`{"jsonrpc":"2.0","id":"s-2","method":"tools/call","params":{"name":"t__echo","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`, true},
			{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t__nope"}}`, false},
			{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t__echo","_meta":{"progressToken":1}}}`, false},
			{`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, false},
		} {
			r.gw.slowOnly.Store(false)
			before := r.gw.fastServed.Load()
			fs, fct, _, fb := post(sid, version, c.body)
			if took := r.gw.fastServed.Load() > before; took != c.fast {
				t.Errorf("%s %s: fast path taken %v, want %v", version, c.body, took, c.fast)
			}
			r.gw.slowOnly.Store(true)
			ss, sct, _, sb := post(sid, version, c.body)
			r.gw.slowOnly.Store(false)
			if fs != ss || fct != sct || fb != sb {
				t.Errorf("%s %s:\nfast %d %s %q\nSDK  %d %s %q", version, c.body, fs, fct, fb, ss, sct, sb)
			}
		}
		// A cancel naming a fast call ends it, and its process.
		done := make(chan string, 1)
		go func() {
			_, _, _, b := post(sid, version, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t__sleep"}}`)
			done <- b
		}()
		pid := <-started
		if st, _, _, _ := post(sid, version, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`); st != http.StatusAccepted {
			t.Errorf("cancel: %d", st)
		}
		if !gone(pid, time.Second) {
			t.Fatalf("%s: process still there 1 s after the cancel", version)
		}
		select {
		case b := <-done:
			if !strings.Contains(b, `"a2c_cancelled":true`) {
				t.Errorf("%s: the cancelled call answered %s", version, b)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the cancelled call did not end", version)
		}
	}
}

// fastReq is a request the fast path takes, changed by f.
func fastReq(body string, f func(http.Header)) *http.Request {
	r, _ := http.NewRequest("POST", "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	r.Header.Set("Mcp-Method", "tools/call")
	r.Header.Set("Mcp-Name", "b__t")
	if f != nil {
		f(r.Header)
	}
	return r
}

const fastMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// TestParseFast: what the fast path takes, and what it leaves to the SDK.
func TestParseFast(t *testing.T) {
	ok := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b__t","arguments":{},` + fastMeta + `}}`
	for _, c := range []struct {
		name   string
		body   string
		header func(http.Header)
		want   bool
	}{
		{"plain", ok, nil, true},
		{"no arguments", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"b__t",` + fastMeta + `}}`, nil, true},
		{"client info", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b__t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}`, nil, true},
		{"other revision header", ok, func(h http.Header) { h.Set("Mcp-Protocol-Version", "2025-11-25") }, false},
		{"method header", ok, func(h http.Header) { h.Set("Mcp-Method", "tools/list") }, false},
		{"name header", ok, func(h http.Header) { h.Set("Mcp-Name", "b__u") }, false},
		{"no name header", ok, func(h http.Header) { h.Del("Mcp-Name") }, false},
		{"content type", ok, func(h http.Header) { h.Set("Content-Type", "text/plain") }, false},
		{"accept json only", ok, func(h http.Header) { h.Set("Accept", "application/json") }, false},
		{"accept wildcard", ok, func(h http.Header) { h.Set("Accept", "*/*") }, false},
		{"batch", "[" + ok + "]", nil, false},
		{"extra top key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","x":1,"params":{"name":"b__t",` + fastMeta + `}}`, nil, false},
		{"case variant key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"NAME":"b__t",` + fastMeta + `}}`, nil, false},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"b__t",` + fastMeta + `}}`, nil, false},
		{"float id", `{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"b__t",` + fastMeta + `}}`, nil, false},
		{"escaped id", `{"jsonrpc":"2.0","id":"\u0041","method":"tools/call","params":{"name":"b__t",` + fastMeta + `}}`, nil, false},
		{"array arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b__t","arguments":[1],` + fastMeta + `}}`, nil, false},
		{"input responses", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b__t","inputResponses":{},` + fastMeta + `}}`, nil, false},
		{"no meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b__t"}}`, nil, false},
		{"meta other revision", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b__t","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`, nil, false},
		{"no capabilities", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b__t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil, false},
		{"capability not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b__t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":true}}}}`, nil, false},
		{"log level", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b__t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}}}`, nil, false},
		{"client info without version", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b__t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c"}}}}`, nil, false},
		{"jsonrpc 1", `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"b__t",` + fastMeta + `}}`, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := fastReq(c.body, c.header)
			if _, got := parseFast(r, []byte(c.body)); got != c.want {
				t.Errorf("parseFast = %v, want %v", got, c.want)
			}
		})
	}
}

// FuzzParseFast: any body is either left to the SDK or read as a request
// whose name is the Mcp-Name header's and whose id is written back as it
// came.
func FuzzParseFast(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b__t","arguments":{},` + fastMeta + `}}`)
	f.Add(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"b__t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"a":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		r := fastReq(body, nil)
		fr, ok := parseFast(r, []byte(body))
		if !ok {
			return
		}
		if fr.name != "b__t" || !plainID(fr.id) || (len(fr.args) > 0 && fr.args[0] != '{') {
			t.Fatalf("took %q: %+v", body, fr)
		}
	})
}

// TestCloseIdle: the gateway closes a session unused for the idle time
// (the SDK's own timer is off: it would not see the fast path's calls);
// a used one stays.
func TestCloseIdle(t *testing.T) {
	r := newRig(t, "", 10*time.Second)
	r.computer(t, "o1", "c1", computer.ApproveAll, testTools(nil))
	cs := r.client(t, "/offices/o1/mcp", eras[0], nil)
	o, _, _ := r.gw.office("o1")
	o.done()
	o.closeIdle(time.Hour) // meets the session
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "t__echo"}); err != nil {
		t.Fatal(err)
	}
	o.closeIdle(time.Hour) // used a moment ago: stays
	if o.sessions() != 1 {
		t.Fatalf("%d sessions", o.sessions())
	}
	o.closeIdle(0)
	if o.sessions() != 0 {
		t.Fatalf("%d sessions after closeIdle(0)", o.sessions())
	}
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "t__echo"}); err == nil {
		t.Fatal("a call on a closed session succeeded")
	}
}
