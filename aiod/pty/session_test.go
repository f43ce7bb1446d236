package pty

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestCtrlCResizeTruncate(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	id := h.session(map[string]any{"cols": 90, "rows": 30})
	if r := h.exec(id, map[string]any{"command": "tput cols; tput lines; echo $TERM"}); r.Output != "90\n30\nxterm-256color" {
		t.Fatalf("%q", r.Output)
	}
	r := h.exec(id, map[string]any{"command": "sleep 100.25", "async": true})
	if r.Status != StatusRunning {
		t.Fatalf("%+v", r)
	}
	running(t, "sleep 100.25", 1)
	var st statusResult
	h.OK("POST", "/v2/pty/sessions/"+id+"/input", map[string]any{"input": "\u0003"}, &st)
	gone(t, "sleep 100.25")
	h.OK("POST", "/v1/shell/wait", map[string]any{"id": id, "seconds": 5}, &st)
	h.OK("GET", "/v2/pty/sessions/"+id+"/screen", nil, &r)
	if st.Status != StatusCompleted || r.Status != StatusCompleted || code(r.ExitCode) != "130" {
		t.Fatalf("%+v %+v", st, r)
	}
	// Resize: both or neither; the shell sees the new width.
	h.Fails(400, "PATCH", "/v2/pty/sessions/"+id, map[string]any{"cols": 100})
	var sz sizeResult
	h.OK("PATCH", "/v2/pty/sessions/"+id, map[string]any{"cols": 132, "rows": 40}, &sz)
	if sz.Cols != 132 || sz.Rows != 40 {
		t.Fatalf("%+v", sz)
	}
	if r = h.exec(id, map[string]any{"command": "tput cols"}); r.Output != "132" {
		t.Fatalf("%q", r.Output)
	}
	_, env := h.do("PATCH", "/v2/pty/sessions/"+id, map[string]any{"no_change_timeout": 5})
	if !env.Success || string(env.Data) != "null" {
		t.Fatalf("%+v", env)
	}
	h.Fails(404, "PATCH", "/v2/pty/sessions/nope", map[string]any{"no_change_timeout": 5})
	// Truncation: first and last 15,000 bytes around the marker.
	r = h.exec(id, map[string]any{"command": "printf 'A%.0s' $(seq 20000); printf 'B%.0s' $(seq 20000)"})
	want := strings.Repeat("A", 15000) + TruncationMarker + strings.Repeat("B", 15000)
	if r.Output != want {
		t.Fatalf("truncated output: %d bytes, head %q", len(r.Output), r.Output[:min(40, len(r.Output))])
	}
	if !strings.Contains(r.Console[len(r.Console)-1].Output, TruncationMarker) {
		t.Fatal("console not truncated")
	}
}

func TestLifecycle(t *testing.T) {
	h := newHarness(t, Config{MaxSessions: 3}, nil)
	dir := t.TempDir()
	var c Created
	h.OK("POST", "/v2/pty/sessions", map[string]any{"id": "t1", "cwd": dir, "retention": "persistent"}, &c)
	if c.SessionID != "t1" || c.WorkingDir != dir {
		t.Fatalf("%+v", c)
	}
	h.OK("POST", "/v2/pty/sessions", map[string]any{"id": "t1"}, &c) // idempotent
	for _, bad := range []map[string]any{
		{"env": map[string]string{"A": "b"}},
		{"cols": 80},
		{"cwd": "/nonexistent"},
		{"user": "no-such-user-xyz"},
		{"id": "t1", "user": "nobody"},
		{"retention": "forever"},
	} {
		h.Fails(400, "POST", "/v2/pty/sessions", bad)
	}
	if msg := h.Fails(400, "POST", "/v2/pty/sessions", map[string]any{"user": "no-such-user-xyz"}); msg != "no such user: no-such-user-xyz" {
		t.Fatal(msg)
	}
	if r := h.exec("t1", map[string]any{"command": "pwd"}); r.Output != dir {
		t.Fatalf("%q", r.Output)
	}
	var info Info
	h.OK("GET", "/v2/pty/sessions/t1", nil, &info)
	if info.WorkingDir != dir || info.Status != "idle" || info.CurrentCommand != nil {
		t.Fatalf("%+v", info)
	}
	for _, p := range []string{"/v2/pty/sessions/nope", "/v2/pty/sessions/nope/screen"} {
		h.Fails(404, "GET", p, nil)
	}
	h.Fails(404, "POST", "/v2/pty/sessions/nope/exec", map[string]any{"command": "true"})
	h.Fails(404, "POST", "/v2/pty/sessions/nope/input", map[string]any{"input": "x"})
	h.Fails(404, "POST", "/v2/pty/sessions/nope/signal", nil)
	h.Fails(422, "POST", "/v2/pty/sessions/t1/exec", map[string]any{})

	// Capacity: persistent sessions are never evicted; an expiring idle one is.
	h.session(map[string]any{"id": "t2"})
	h.session(map[string]any{"id": "e1", "retention": "expiring"})
	h.session(map[string]any{"id": "t3"}) // evicts e1
	h.Fails(404, "GET", "/v2/pty/sessions/e1", nil)
	if msg := h.Fails(400, "POST", "/v2/pty/sessions", map[string]any{"id": "t4"}); !strings.Contains(msg, "Maximum number of terminal sessions (3)") {
		t.Fatal(msg)
	}
	var list listResult
	h.OK("GET", "/v2/pty/sessions", nil, &list)
	if len(list.Sessions) != 3 || list.Stats.TotalSessions != 3 || list.Stats.MaxSessions != 3 || list.Stats.UsageRatio != 1 ||
		list.Stats.SessionTimeout != 3600 || list.Sessions["t1"].WorkingDir != dir {
		t.Fatalf("%+v", list)
	}
	// The listing is exactly the published shape.
	_, env := h.do("GET", "/v2/pty/sessions", nil)
	var raw map[string]map[string]json.RawMessage
	_ = json.Unmarshal(env.Data, &raw)
	if len(raw["stats"]) != 6 || len(raw["sessions"]) != 3 {
		t.Fatalf("%s", env.Data)
	}

	// signal: SIGKILL, the session closes; a second call is a 404.
	h.exec("t2", map[string]any{"command": "sleep 100.5", "async": true})
	var k KillResult
	h.OK("POST", "/v2/pty/sessions/t2/signal", nil, &k)
	if k.Status != StatusTerminated || code(k.ExitCode) != "-9" || code(k.ReturnCode) != "-9" {
		t.Fatalf("%+v", k)
	}
	gone(t, "sleep 100.5")
	h.Fails(404, "POST", "/v2/pty/sessions/t2/signal", nil)
	h.Fails(404, "GET", "/v2/pty/sessions/t2", nil)
	// DELETE: 200; gone: 200 success false.
	h.OK("DELETE", "/v2/pty/sessions/t3", nil, nil)
	h.Fails(200, "DELETE", "/v2/pty/sessions/t3", nil)
	// A shell that exits ends its session; exec reports its status.
	r := h.exec("t1", map[string]any{"command": "echo bye; exit 3"})
	if r.Status != StatusCompleted || code(r.ExitCode) != "3" || !strings.Contains(r.Output, "bye") {
		t.Fatalf("%+v", r)
	}
	eventually(t, "session t1 outlived its shell", func() bool { st, _ := h.do("GET", "/v2/pty/sessions/t1", nil); return st == 404 })
}

func TestIdleReclaimAndClose(t *testing.T) {
	p := New(Config{Workspace: t.TempDir(), SessionIdle: 300 * time.Millisecond})
	e := p.Engine()
	exp, err := e.Create(Options{Retention: RetentionExpiring})
	if err != nil {
		t.Fatal(err)
	}
	per, err := e.Create(Options{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "expiring session not reclaimed", func() bool { _, err := e.Session(exp.SessionID); return isNotFound(err) })
	if _, err := e.Session(per.SessionID); err != nil {
		t.Fatal("persistent session reclaimed")
	}
	// Close ends every shell and what runs in it, detached or not.
	if _, err := e.Exec(context.Background(), per.SessionID, ExecRequest{Command: "sleep 100.75 & setsid sleep 100.75 & sleep 100.75", Async: true}); err != nil {
		t.Fatal(err)
	}
	running(t, "sleep 100.75", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	gone(t, "sleep 100.75")
	if _, err := e.Create(Options{}); err == nil {
		t.Fatal("created after Close")
	}
}

// TestEnvHidden: shells do not inherit the daemon's secrets, the
// variables the exec markers are built on, or Config.HideEnv; they carry
// the session tag, the terminal type and a UTF-8 locale.
func TestEnvHidden(t *testing.T) {
	t.Setenv("AIO_API_KEY", "secret-1")
	t.Setenv("SANDBOX_API_KEY", "secret-2")
	t.Setenv("AIOD_TEST_HIDDEN", "secret-3")
	t.Setenv("BASH_ENV", "/secret-4")
	h := newHarness(t, Config{HideEnv: []string{"AIOD_TEST_HIDDEN"}}, nil)
	r := h.exec(h.session(nil), map[string]any{"command": "env"})
	if strings.Contains(r.Output, "secret-") || !strings.Contains(r.Output, "TERM=xterm-256color") || !strings.Contains(r.Output, tagVar+"=") {
		t.Fatal(r.Output)
	}
}

// TestDefaultUserUnusable: a default user (AIO_DEFAULT_USER) that does
// not resolve is the daemon's fault (503, naming the variable); a
// requested user that does not resolve is the client's (400).
func TestDefaultUserUnusable(t *testing.T) {
	h := newHarness(t, Config{DefaultUser: "no-such-user-xyz"}, nil)
	if msg := h.Fails(503, "POST", "/v2/pty/sessions", nil); msg != "AIO_DEFAULT_USER cannot be used: no such user: no-such-user-xyz" {
		t.Fatal(msg)
	}
	if msg := h.Fails(400, "POST", "/v2/pty/sessions", map[string]any{"user": "no-such-user-abc"}); msg != "no such user: no-such-user-abc" {
		t.Fatal(msg)
	}
}

// TestNoChangeZeroMeansNever: no_change_timeout 0 on create means never,
// as on exec and PATCH, not "interrupt at once".
func TestNoChangeZeroMeansNever(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.OK("POST", "/v2/pty/sessions", map[string]any{"id": "z0", "no_change_timeout": 0}, nil)
	var r struct {
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
	}
	h.OK("POST", "/v2/pty/sessions/z0/exec", map[string]any{"command": "sleep 0.3; echo quick"}, &r)
	if r.Status != StatusCompleted || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("%+v", r)
	}
}

// TestEviction: at the cap, a new terminal evicts the least recently
// used reclaimable one (expiring, nothing running, no socket); a running
// command or an attached socket keeps an expiring terminal, and with
// nothing reclaimable the create is refused.
func TestEviction(t *testing.T) {
	h := newHarness(t, Config{MaxSessions: 3}, nil)
	for _, id := range []string{"old", "new", "busy"} {
		h.session(map[string]any{"id": id, "retention": "expiring"})
	}
	h.exec("busy", map[string]any{"command": "sleep 100.125", "async": true})
	h.OK("GET", "/v2/pty/sessions/old/screen", nil, nil) // old is now the most recently used idle one
	h.session(map[string]any{"id": "n1"})                // evicts new
	h.Fails(404, "GET", "/v2/pty/sessions/new", nil)
	h.OK("GET", "/v2/pty/sessions/old", nil, nil)
	c, _, err := h.dial("/v2/pty/sessions/old/ws")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if f, err := next(t, c, 5*time.Second); err != nil || f.Type != "ready" {
		t.Fatalf("%+v %v", f, err)
	}
	if msg := h.Fails(400, "POST", "/v2/pty/sessions", map[string]any{"id": "n2"}); msg != "Maximum number of terminal sessions (3) reached" {
		t.Fatal(msg)
	}
	for _, id := range []string{"old", "busy", "n1"} {
		h.OK("GET", "/v2/pty/sessions/"+id, nil, nil)
	}
	h.OK("POST", "/v2/pty/sessions/busy/signal", nil, nil)
	gone(t, "sleep 100.125")
}

// TestCreateSameIDConcurrently: requests creating one new id at once
// start one shell; each gets that terminal or, while it starts, the
// "being created" refusal.
func TestCreateSameIDConcurrently(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	const n = 6
	type answer struct {
		status int
		msg    string
		id     string
	}
	answers := make(chan answer, n)
	for range n {
		go func() {
			st, r, _ := h.Do("POST", "/v2/pty/sessions", map[string]any{"id": "same"})
			var c Created
			_ = json.Unmarshal(r.Data, &c)
			answers <- answer{st, r.Message, c.SessionID}
		}()
	}
	for range n {
		a := <-answers
		if !(a.status == 200 && a.id == "same") && !(a.status == 400 && a.msg == "Session same is being created") {
			t.Errorf("%+v", a)
		}
	}
	var list listResult
	h.OK("GET", "/v2/pty/sessions", nil, &list)
	if len(list.Sessions) != 1 || list.Stats.TotalSessions != 1 {
		t.Fatalf("%+v", list)
	}
	if n := shells(); n != 1 {
		t.Fatalf("%d shells started for one id", n)
	}
}

// TestCloseWhileStarting: a terminal whose shell is still starting when
// the engine closes is ended once started: the create is refused (503),
// Close waits for it, and no process of it is left.
func TestCloseWhileStarting(t *testing.T) {
	// A bash that takes a while to start (kindOf goes by the name).
	slow := t.TempDir() + "/bash"
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 0.5 # aiod-slow-start\nexec /bin/bash \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash")
	}
	p := New(Config{Workspace: t.TempDir(), Shell: slow})
	e := p.Engine()
	created := make(chan error, 1)
	go func() {
		_, err := e.Create(Options{ID: "starting"})
		created <- err
	}()
	eventually(t, "the session never held its id", func() bool { _, ok := e.reg.Get(tier, "starting"); return ok })
	if _, err := e.Session("starting"); !isNotFound(err) {
		t.Fatalf("a starting session is visible: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-created; !errors.Is(err, ErrUnavailable) || err.Error() != "aiod is shutting down" {
		t.Fatalf("create during Close: %v", err)
	}
	gone(t, "aiod-slow-start")
	eventually(t, "a shell outlived Close", func() bool { return shells() == 0 })
}
