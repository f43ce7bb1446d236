package a2c

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/tracing"
)

var caConsoleRE = regexp.MustCompile(`(?m)^a2c up: console url=(http://127\.0\.0\.1:\d+/)$`)

// caClient is a browser-like client of the console: a cookie jar, and
// the console's own Origin on every request that changes something.
type caClient struct {
	t    *testing.T
	base string
	http *http.Client
}

func (c *caClient) do(method, path, ctype, body string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+strings.TrimPrefix(path, "/"), strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if method != "GET" {
		req.Header.Set("Origin", strings.TrimSuffix(c.base, "/"))
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// caCall is the part of a console Call the test checks.
type caCall struct {
	ReqID    string `json:"req_id"`
	Agent    string `json:"agent"`
	Computer string `json:"computer"`
	Office   string `json:"office"`
	Tool     string `json:"tool"`
	State    string `json:"state"`
	Outcome  string `json:"outcome"`
	Console  bool   `json:"console"`
	TraceID  string `json:"trace_id"`
}

// TestConsoleAPI drives the console's HTTP API of a real "a2c up" as its
// page does: login, the offices, the sandbox Computer's tools, a tool
// call from the form, the call in the list, in the live stream and with
// its trace, and the sandbox's files through the proxy.
func TestConsoleAPI(t *testing.T) {
	const token = "console-t0ken"
	u := startUp(t, "--token", token)
	m := caConsoleRE.FindStringSubmatch(u.Logs())
	if m == nil {
		t.Fatalf("no console line in:\n%s", u.Logs())
	}
	jar, _ := cookiejar.New(nil)
	c := &caClient{t: t, base: m[1], http: &http.Client{Jar: jar, Timeout: 30 * time.Second}}

	// Before login: the API refuses.
	if code, body := c.do("GET", "/api/console/offices", "", ""); code != 401 || body != `{"error":{"code":401,"message":"login required"}}` {
		t.Fatalf("before login: %d %s", code, body)
	}
	if code, _ := c.do("POST", "/login", "application/x-www-form-urlencoded", url.Values{"token": {token}}.Encode()); code != 200 {
		t.Fatalf("login (followed to /): %d", code)
	}

	// The office and its sandbox Computer.
	code, body := c.do("GET", "/api/console/offices", "", "")
	var offices struct {
		Offices []struct {
			OfficeID string `json:"office_id"`
			Members  []struct {
				Name           string `json:"name"`
				Role           string `json:"role"`
				ConnectedSince string `json:"connected_since"`
			} `json:"members"`
		} `json:"offices"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &offices) != nil || len(offices.Offices) != 1 || offices.Offices[0].OfficeID != "default" ||
		len(offices.Offices[0].Members) != 1 || offices.Offices[0].Members[0].Name != "sandbox" || offices.Offices[0].Members[0].Role != "computer" {
		t.Fatalf("offices: %d %s", code, body)
	}
	if _, err := time.Parse(time.RFC3339, offices.Offices[0].Members[0].ConnectedSince); err != nil {
		t.Fatalf("connected_since: %v", err)
	}
	code, body = c.do("GET", "/api/console/offices/default/computers/sandbox", "", "")
	var comp struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
			Meta        struct {
				Tags      []string `json:"tags"`
				AutoApply bool     `json:"auto_apply"`
			} `json:"meta"`
		} `json:"tools"`
		Servers []struct {
			BundleID string `json:"bundle_id"`
		} `json:"servers"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &comp) != nil || len(comp.Servers) != 1 || comp.Servers[0].BundleID != "sandbox" {
		t.Fatalf("computer: %d %s", code, body)
	}
	var names []string
	for _, tl := range comp.Tools {
		names = append(names, tl.Name)
		if tl.Name == "sandbox__sandbox_execute_bash" && !strings.Contains(string(tl.InputSchema), `"cmd"`) {
			t.Errorf("execute_bash schema %s", tl.InputSchema)
		}
		if tl.Meta.Tags == nil {
			t.Errorf("%s: tags null", tl.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, sandboxTools) {
		t.Fatalf("tools %v, want %v", names, sandboxTools)
	}

	// The live stream, open before the call.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"api/console/calls/stream?office=default", nil)
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := make(chan caCall, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		name := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && name == "call":
				var call caCall
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &call) == nil {
					events <- call
				}
			}
		}
	}()
	// Its headers came: the subscription exists, no event can be missed.

	// A tool call from the form.
	code, body = c.do("POST", "/api/console/offices/default/computers/sandbox/call", "application/json",
		`{"tool":"sandbox__sandbox_execute_bash","arguments":{"cmd":"echo console-$((6*7))"},"timeout":20}`)
	var ans struct {
		ReqID   string `json:"req_id"`
		Agent   string `json:"agent"`
		TraceID string `json:"trace_id"`
		Result  struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &ans) != nil || ans.Agent != "a2c-console" || ans.Result.IsError ||
		len(ans.Result.Content) == 0 || !strings.Contains(ans.Result.Content[0].Text, "console-42") {
		t.Fatalf("call: %d %s", code, body)
	}
	if ans.TraceID != tracing.TraceID(ans.Agent, ans.ReqID).String() {
		t.Fatalf("trace_id %s", ans.TraceID)
	}

	// In the list, marked as the console's.
	code, body = c.do("GET", "/api/console/calls?office=default", "", "")
	var list struct {
		Calls []caCall `json:"calls"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Calls) == 0 {
		t.Fatalf("calls: %d %s", code, body)
	}
	if got := list.Calls[0]; got.ReqID != ans.ReqID || !got.Console || got.State != "done" || got.Outcome != "ok" ||
		got.Tool != "sandbox__sandbox_execute_bash" || got.Computer != "sandbox" || got.Office != "default" || got.TraceID != ans.TraceID {
		t.Fatalf("listed call %+v", got)
	}
	// In the stream: its start, then its end.
	for _, state := range []string{"running", "done"} {
		select {
		case got, ok := <-events:
			if !ok || got.ReqID != ans.ReqID || got.State != state || !got.Console || got.Agent != "a2c-console" {
				t.Fatalf("stream event %+v, want %s of %s", got, state, ans.ReqID)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s event in the stream", state)
		}
	}

	// Its detail, with the trace: the hub's spans, and in a2c up every
	// hop's.
	want := []string{tracing.SpanHubRelay, tracing.SpanHubQueue, tracing.SpanHubWire, tracing.SpanComputerCall}
	var spans []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body = c.do("GET", "/api/console/calls/a2c-console/"+ans.ReqID, "", "")
		var detail struct {
			Call  *caCall `json:"call"`
			Trace []struct {
				Name    string `json:"name"`
				TraceID string `json:"trace_id"`
			} `json:"trace"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &detail) != nil || detail.Call == nil || detail.Call.ReqID != ans.ReqID {
			t.Fatalf("detail: %d %s", code, body)
		}
		spans = spans[:0]
		for _, s := range detail.Trace {
			if s.TraceID != ans.TraceID {
				t.Fatalf("span of another trace: %s", body)
			}
			spans = append(spans, s.Name)
		}
		all := true
		for _, w := range want {
			all = all && slices.Contains(spans, w)
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace spans %v, want at least %v", spans, want)
		}
	}
	t.Logf("trace: %v", spans)

	// The sandbox's files through the proxy.
	if err := os.WriteFile(filepath.Join(u.Workspace, "console-file.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, body = c.do("GET", "/api/console/sandboxes", "", "")
	if code != 200 || !strings.HasPrefix(body, `{"sandboxes":[{"name":"sandbox","url":"http://127.0.0.1:`) {
		t.Fatalf("sandboxes: %d %s", code, body)
	}
	code, body = c.do("GET", "/api/console/sandboxes/sandbox/api/v2/fs/list?path="+url.QueryEscape(u.Workspace), "", "")
	if code != 200 || !strings.Contains(body, `"console-file.txt"`) {
		t.Fatalf("workspace list: %d %s", code, body)
	}
	if code, _ := c.do("GET", "/api/console/sandboxes/sandbox/api/v1/browser/info", "", ""); code != 404 {
		t.Fatalf("a route outside the allowlist: %d", code)
	}
	// Logout ends the session.
	if code, _ := c.do("POST", "/logout", "", ""); code != 200 {
		t.Fatalf("logout (followed to /): %d", code)
	}
	if code, _ := c.do("GET", "/api/console/offices", "", ""); code != 401 {
		t.Fatalf("after logout: %d", code)
	}
}
