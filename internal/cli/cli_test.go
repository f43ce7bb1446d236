package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
)

func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return code, o.String(), e.String()
}

func TestBadCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nope"}, `a2c: unknown command "nope"`},
		{[]string{"server", "--bogus"}, "a2c server: flag provided but not defined: -bogus"},
		{[]string{"server", "--token", "a", "--token-file", "f"}, "a2c server: --token and --token-file are exclusive"},
		{[]string{"server", "--log-level", "loud"}, "a2c server: bad --log-level loud"},
		// Sizes and timeouts that mean nothing at zero or below, and a path
		// that is not one, are refused before anything listens.
		{[]string{"server", "--listen", "127.0.0.1:0", "--max-payload", "-1"}, "a2c server: --max-payload must be greater than zero, got -1"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--max-request", "0"}, "a2c server: --max-request must be greater than zero, got 0"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--relay-timeout", "-5s"}, "a2c server: --relay-timeout must be greater than zero, got -5s"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--body-idle-timeout", "0s"}, "a2c server: --body-idle-timeout must be greater than zero, got 0s"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--shutdown-timeout", "-1s"}, "a2c server: --shutdown-timeout must be zero or more, got -1s"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--path", "no-slash"}, `a2c server: path "no-slash" must be a URL path starting with / (no query, fragment or spaces)`},
		// A cluster key means something only in a cluster, and is long.
		{[]string{"server", "--listen", "127.0.0.1:0", "--cluster-key", "0123456789abcdef"}, "a2c server: --cluster-key, --cluster-key-file and $A2C_CLUSTER_KEY need --redis"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--redis", "redis://127.0.0.1:1", "--cluster-key", "short"}, "a2c server: joining the cluster: cluster: the cluster key has 5 bytes; it needs at least 16 (32 random bytes are best)"},
		{[]string{"computer", "--upload-max-bytes", "0"}, "a2c computer: --upload-max-bytes must be greater than zero, got 0"},
		{[]string{"computer", "--upload-max-concurrent", "-2"}, "a2c computer: --upload-max-concurrent must be greater than zero, got -2"},
		{[]string{"computer", "--upload-idle-timeout", "0s"}, "a2c computer: --upload-idle-timeout must be greater than zero, got 0s"},
		{[]string{"computer", "history", "--last", "0"}, "a2c computer: --last must be greater than zero, got 0"},
		{[]string{"computer", "check", "--wait", "-1s"}, "a2c computer: --wait must be greater than zero, got -1s"},
		{[]string{"call"}, "a2c call: exactly one TOOL (its exposed name) is required"},
		{[]string{"call", "t", "--args", "[1]"}, "a2c call: --args must be a JSON object"},
		{[]string{"call", "t", "--timeout", "0"}, "a2c call: --timeout must be 1..3600"},
		{[]string{"cancel"}, "a2c cancel: exactly one REQ_ID is required"},
	} {
		code, _, stderr := run(tc.args...)
		if code != 2 || !strings.HasPrefix(stderr, tc.want+"\n") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if code, out, _ := run("server", "-h"); code != 0 || !strings.Contains(out, "-listen") {
		t.Errorf("server -h: %d %q", code, out)
	}
}

// fakeComputer joins an office of srvURL and answers tools and calls.
type fakeComputer struct{}

func (fakeComputer) Event(_ *sio.Socket, e *sio.Event) {
	var req map[string]any
	_ = json.Unmarshal(e.Args[0], &req)
	var v any
	switch e.Name {
	case smcp.EventGetTools:
		v = smcp.GetToolsRet{ReqID: req["req_id"].(string), Tools: []smcp.SMCPTool{{Name: "b__echo", BundleID: "b", Description: "Echo text\nmore"}}}
	case smcp.EventToolCall:
		p, _ := json.Marshal(req["params"])
		v = smcp.CallToolResult{IsError: strings.Contains(string(p), "fail"), Content: []json.RawMessage{smcp.TextContent("got " + string(p))}}
	default:
		return
	}
	b, _ := json.Marshal(v)
	_ = e.Ack(sio.Message{Args: []json.RawMessage{b}})
}
func (fakeComputer) Disconnect(*sio.Socket, string) {}

func TestAgentCommands(t *testing.T) {
	srv, err := server.New(server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := sio.Dial(ctx, ts.URL, sio.ClientOptions{Namespace: smcp.Namespace,
		Query: map[string][]string{smcp.QueryVersion: {smcp.ProtocolVersion}}, Handler: fakeComputer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Disconnect()
	join, _ := json.Marshal(smcp.EnterOfficeReq{Role: smcp.RoleComputer, Name: "pc", OfficeID: "default"})
	done := make(chan struct{})
	s.Request(smcp.EventJoinOffice, sio.Message{Args: []json.RawMessage{join}}, 5*time.Second, func(sio.Message, error) { close(done) })
	<-done

	code, out, stderr := run("tools", "--server", ts.URL, "--json")
	var tools []computerTools
	if code != 0 || json.Unmarshal([]byte(out), &tools) != nil || len(tools) != 1 || tools[0].Computer != "pc" || tools[0].Tools[0].Name != "b__echo" {
		t.Fatalf("tools --json: %d %q %q", code, out, stderr)
	}
	if code, out, _ := run("tools", "--server", ts.URL); code != 0 || !strings.Contains(out, "pc        b__echo  Echo text\n") {
		t.Errorf("tools: %d %q", code, out)
	}
	if code, out, _ := run("room", "--server", ts.URL, "--name", "me"); code != 0 || !strings.Contains(out, "agent     me") || !strings.Contains(out, "computer  pc") {
		t.Errorf("room: %d %q", code, out)
	}
	if code, out, _ := run("call", "b__echo", "--server", ts.URL, "--args", `{"text":"hi"}`); code != 0 || out != "got {\"text\":\"hi\"}\n" {
		t.Errorf("call: %d %q", code, out)
	}
	code, out, stderr = run("call", "b__echo", "--server", ts.URL, "--args", `{"text":"fail"}`, "--json")
	var res smcp.CallToolResult
	if code != 1 || json.Unmarshal([]byte(out), &res) != nil || !res.IsError || !strings.Contains(stderr, "tool call failed") {
		t.Errorf("failing call: %d %q %q", code, out, stderr)
	}
	if code, _, stderr := run("call", "nope", "--server", ts.URL); code != 1 || !strings.Contains(stderr, `no Computer in the office exposes "nope"`) {
		t.Errorf("unknown tool: %d %q", code, stderr)
	}
	if code, out, _ := run("cancel", "r1", "--server", ts.URL); code != 0 || out != "cancel sent for r1\n" {
		t.Errorf("cancel: %d %q", code, out)
	}
}

func TestCommandInput(t *testing.T) {
	out, err := runCommandInput(context.Background(), "printf 'tok-123\n'", map[string]string{"ignored": "x"})
	if err != nil || out != "tok-123\n" {
		t.Fatalf("out = %q, %v", out, err)
	}
	_, err = runCommandInput(context.Background(), "echo s3cr3t; exit 3", nil)
	if err == nil || err.Error() != "command input failed with exit status 3" {
		t.Fatalf("err = %v", err)
	}
}
