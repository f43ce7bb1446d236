package pty

import (
	"strings"
	"testing"
)

func TestV1Shell(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	var d Result
	_, env := h.do("POST", "/v1/shell/exec", map[string]any{"command": "printf shell-doc-ok"})
	if env.Message != "Command executed" {
		t.Fatalf("%+v", env)
	}
	h.OK("POST", "/v1/shell/exec", map[string]any{"command": "printf shell-doc-ok"}, &d)
	if d.SessionID == "" || d.Status != StatusCompleted || d.Output != "shell-doc-ok" || code(d.ExitCode) != "0" || d.Command == nil {
		t.Fatalf("%+v", d)
	}
	sid := d.SessionID
	h.OK("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "false"}, &d)
	if code(d.ExitCode) != "1" || len(d.Console) != 2 || d.Console[1].Command != "false" {
		t.Fatalf("%+v", d)
	}
	h.Fails(404, "POST", "/v1/shell/exec", map[string]any{"id": "nope", "command": "true"})
	// exec_dir moves an existing shell; strict refuses an unusable one.
	dir := t.TempDir()
	h.OK("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "pwd", "exec_dir": dir}, &d)
	if d.Output != dir {
		t.Fatalf("%q", d.Output)
	}
	h.Fails(400, "POST", "/v1/shell/exec", map[string]any{"command": "true", "exec_dir": "/nonexistent", "strict": true})
	h.OK("POST", "/v1/shell/exec", map[string]any{"command": "true", "exec_dir": "/nonexistent"}, nil)
	// truncate:false keeps a long output whole.
	h.OK("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "head -c 40000 /dev/zero | tr '\\0' y", "truncate": false}, &d)
	if len(d.Output) != 40000 {
		t.Fatalf("%d", len(d.Output))
	}

	// The published prompt example: async, view, write (Enter on), wait.
	h.OK("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": `read -p "Name: " name; echo Hello $name`, "async_mode": true}, &d)
	if d.Status != StatusRunning {
		t.Fatalf("%+v", d)
	}
	eventually(t, "no prompt on the screen", func() bool {
		h.OK("POST", "/v1/shell/view", map[string]any{"id": sid}, &d)
		return d.Output == "Name: "
	})
	if d.Command == nil || d.Status != StatusRunning {
		t.Fatalf("%+v", d)
	}
	var st statusResult
	h.OK("POST", "/v1/shell/write", map[string]any{"id": sid, "input": "Alice"}, &st)
	h.OK("POST", "/v1/shell/wait", map[string]any{"id": sid, "seconds": 5}, &st)
	h.OK("POST", "/v1/shell/view", map[string]any{"id": sid}, &d)
	if st.Status != StatusCompleted || d.Output != "Name: Alice\nHello Alice" || code(d.ExitCode) != "0" || d.Command != nil {
		t.Fatalf("%+v %+v", st, d)
	}

	// Sessions: create, list, stats, update, kill, delete.
	var c Created
	h.OK("POST", "/v1/shell/sessions/create", map[string]any{"id": "t1", "exec_dir": dir}, &c)
	if c.SessionID != "t1" || c.WorkingDir != dir {
		t.Fatalf("%+v", c)
	}
	var sessions struct {
		Sessions map[string]Info `json:"sessions"`
	}
	h.OK("GET", "/v1/shell/sessions", nil, &sessions)
	if len(sessions.Sessions) != 4 || sessions.Sessions["t1"].WorkingDir != dir {
		t.Fatalf("%+v", sessions)
	}
	var stats Stats
	h.OK("GET", "/v1/shell/sessions/stats", nil, &stats)
	if stats.TotalSessions != 4 || stats.MaxSessions != 20 || stats.SessionTimeout != 3600 {
		t.Fatalf("%+v", stats)
	}
	var up v1UpdateResult
	h.OK("POST", "/v1/shell/sessions/update", map[string]any{"id": "t1", "no_change_timeout": 1}, &up)
	if up.SessionID != "t1" || up.NoChangeTimeout == nil || *up.NoChangeTimeout != 1 {
		t.Fatalf("%+v", up)
	}
	h.Fails(404, "POST", "/v1/shell/sessions/update", map[string]any{"id": "nope", "no_change_timeout": 1})
	h.OK("POST", "/v1/shell/exec", map[string]any{"id": "t1", "command": "sleep 30"}, &d)
	if d.Status != StatusNoChange || d.ExitCode != nil {
		t.Fatalf("%+v", d)
	}
	h.OK("POST", "/v1/shell/exec", map[string]any{"id": "t1", "command": "sleep 30", "async_mode": true}, &d)
	var k KillResult
	h.OK("POST", "/v1/shell/kill", map[string]any{"id": "t1"}, &k)
	if k.Status != StatusTerminated {
		t.Fatalf("%+v", k)
	}
	h.Fails(404, "POST", "/v1/shell/kill", map[string]any{"id": "t1"})
	h.Fails(200, "DELETE", "/v1/shell/sessions/t1", nil)
	h.OK("DELETE", "/v1/shell/sessions/"+sid, nil, nil)

	// terminal-url: an existing session's page, a new one's, 404 unknown.
	var u string
	h.OK("GET", "/v1/shell/terminal-url", nil, &u)
	if !strings.HasPrefix(u, h.srv.URL+"/terminal?session_id=") {
		t.Fatal(u)
	}
	h.Fails(404, "GET", "/v1/shell/terminal-url?session_id=nope", nil)
	h.OK("DELETE", "/v1/shell/sessions", nil, nil)
	sessions.Sessions = nil
	h.OK("GET", "/v1/shell/sessions", nil, &sessions)
	if len(sessions.Sessions) != 0 {
		t.Fatalf("%+v", sessions)
	}
	gone(t, "sleep 30")
}

// POST /v1/shell/kill ends the session, as the published daemon
// documents it (shell.mdx: "SIGKILL to the process group; closes the
// session"; a second stop answers 404): the answer is the SDKs'
// ShellKillResult with the shell's end, and the id is gone from every
// route afterwards.
func TestV1ShellKillEndsSession(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.OK("POST", "/v1/shell/sessions/create", map[string]any{"id": "k1"}, nil)
	h.OK("POST", "/v1/shell/exec", map[string]any{"id": "k1", "command": "sleep 30", "async_mode": true}, nil)
	status, _, raw := h.Do("POST", "/v1/shell/kill", map[string]any{"id": "k1"})
	const want = `{"success":true,"message":"Operation successful","data":{"status":"terminated","exit_code":-9,"returncode":-9},"hint":null}`
	if status != 200 || strings.TrimSpace(string(raw)) != want {
		t.Fatalf("kill: %d %s\nwant %s", status, raw, want)
	}
	var sessions struct {
		Sessions map[string]Info `json:"sessions"`
	}
	h.OK("GET", "/v1/shell/sessions", nil, &sessions)
	if _, ok := sessions.Sessions["k1"]; ok {
		t.Fatalf("a killed session is still listed: %+v", sessions)
	}
	for _, c := range []struct{ method, path string }{{"POST", "/v1/shell/kill"}, {"POST", "/v1/shell/view"}, {"POST", "/v1/shell/exec"}} {
		if body := h.Fails(404, c.method, c.path, map[string]any{"id": "k1", "command": "true"}); !strings.Contains(body, "k1") {
			t.Errorf("%s %s: %s", c.method, c.path, body)
		}
	}
	gone(t, "sleep 30")
}
