package aiod

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// TestJoinOfficeRefusesBadOptions: every bad option is returned at once,
// before any connection to the server.
func TestJoinOfficeRefusesBadOptions(t *testing.T) {
	var hits atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer ts.Close()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.json", `{"name":"x","type":"stdio"}`)
	input := write("input.json", `{"inputs":[{"id":"k","type":"promptString","description":"key"}],
		"servers":[{"name":"x","type":"stdio","server_parameters":{"command":"true","env":{"K":"${input:k}"}}}]}`)
	d, err := New(pinPorts(t, Config{Workspace: dir}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	for _, tc := range []struct {
		name string
		o    OfficeOptions
		want string
		// usage marks a bad flag value (exit status 2 in aiod).
		usage bool
	}{
		{"no-office", OfficeOptions{}, "an office is required", true},
		{"approve-ask", OfficeOptions{Office: "o", Approve: "ask"}, `--approve must be all or none, got "ask"`, true},
		{"bundle-id", OfficeOptions{Office: "o", BundleID: "a.b"}, `--bundle-id "a.b" is not a valid bundle_id`, true},
		{"config-missing", OfficeOptions{Office: "o", ConfigFile: filepath.Join(dir, "none.json")}, "no such file or directory", true},
		{"config-invalid", OfficeOptions{Office: "o", ConfigFile: bad}, "server_parameters", true},
		{"config-input-without-value", OfficeOptions{Office: "o", ConfigFile: input}, `server "x"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Server = ts.URL
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := d.JoinOffice(ctx, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			var ue usageError
			if errors.As(err, &ue) != tc.usage {
				t.Errorf("usage error = %v, want %v", !tc.usage, tc.usage)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server was contacted %d times", n)
	}
}

// officeHub is an in-process signalling server that wants token.
func officeHub(t *testing.T, token string) string {
	t.Helper()
	srv, err := server.New(server.Config{Auth: server.TokenAuth(token, "x-api-key")})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// joined runs d.JoinOffice(o) until the test ends and returns an Agent in
// the same office, once the Computer is there.
func joined(t *testing.T, d *Daemon, o OfficeOptions) *agent.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	in := make(chan struct{}, 1)
	o.OnJoined = func() {
		select {
		case in <- struct{}{}:
		default:
		}
	}
	go func() { done <- d.JoinOffice(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("JoinOffice = %v after its context ended", err)
		}
	})
	select {
	case <-in:
	case err := <-done:
		t.Fatalf("JoinOffice = %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the Computer never joined")
	}
	actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer acancel()
	a, err := agent.Dial(actx, o.Server, agent.Options{Name: "agent", Auth: map[string]any{"x-api-key": o.Token}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Join(actx, o.Office); err != nil {
		t.Fatal(err)
	}
	return a
}

// pidsOf returns the live processes whose argv is exactly argv.
func pidsOf(argv ...string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err == nil && string(b) == want && !strings.Contains(string(stat), ") Z ") {
			out = append(out, pid)
		}
	}
	return out
}

func TestJoinOffice(t *testing.T) {
	ws := t.TempDir()
	d, err := New(pinPorts(t, Config{Workspace: ws}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	hub := officeHub(t, "tok")
	a := joined(t, d, OfficeOptions{Server: hub, Office: "o1", Name: "box", Token: "tok", BundleID: "sb"})
	ctx := context.Background()

	tools, err := a.Tools(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		if tl.BundleID != "sb" || !strings.HasPrefix(tl.Name, "sb__") {
			t.Errorf("tool %s of bundle %s", tl.Name, tl.BundleID)
		}
		names = append(names, tl.Name)
	}
	if len(names) != 10 || !strings.Contains(strings.Join(names, ","), "sb__sandbox_execute_bash") {
		t.Fatalf("tools = %v", names)
	}

	res, err := a.CallTool(ctx, agent.Call{Computer: "box", Tool: "sb__sandbox_execute_bash", Params: map[string]any{"cmd": "echo hi"}, Timeout: 10 * time.Second})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("echo = %+v, %v", res, err)
	}
	var item struct{ Text string }
	_ = json.Unmarshal(res.Content[0], &item)
	var out struct {
		Output string `json:"output"`
		Cwd    string `json:"cwd"`
	}
	if err := json.Unmarshal([]byte(item.Text), &out); err != nil || out.Output != "hi\n" || out.Cwd != ws {
		t.Fatalf("echo text = %s", item.Text)
	}

	// A cancel reaches the command: its process is gone within a second.
	arg := fmt.Sprintf("31.%06d", time.Now().Nanosecond()/1000)
	t.Cleanup(func() {
		for _, p := range pidsOf("sleep", arg) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	id := agent.NewReqID()
	done := make(chan *smcp.CallToolResult, 1)
	go func() {
		res, _ := a.CallTool(ctx, agent.Call{Computer: "box", Tool: "sb__sandbox_execute_bash", Params: map[string]any{"cmd": "sleep " + arg},
			Timeout: 60 * time.Second, ReqID: id})
		done <- res
	}()
	for deadline := time.Now().Add(10 * time.Second); len(pidsOf("sleep", arg)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sleep never started")
		}
	}
	if err := a.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	cancelled := time.Now()
	if res := <-done; res == nil || !res.Cancelled() {
		t.Fatalf("cancelled call = %+v", res)
	}
	for len(pidsOf("sleep", arg)) > 0 {
		if time.Since(cancelled) > time.Second {
			t.Fatalf("sleep %s still runs 1 s after the cancel", arg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestJoinOfficeApproveNone(t *testing.T) {
	d, err := New(pinPorts(t, Config{Workspace: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	hub := officeHub(t, "tok")
	a := joined(t, d, OfficeOptions{Server: hub, Office: "o2", Name: "box", Token: "tok", Approve: "none"})
	res, err := a.CallTool(context.Background(), agent.Call{Computer: "box", Tool: "sandbox__sandbox_execute_bash",
		Params: map[string]any{"cmd": "echo hi"}, Timeout: 10 * time.Second})
	if err != nil || !res.IsError || res.ErrorCode() != smcp.CodeToolRequiresConfirmation {
		t.Fatalf("result = %+v, %v", res, err)
	}
}
