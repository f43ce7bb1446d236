package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestV1Bash(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	dir := t.TempDir()
	snap := filepath.Join(dir, "snap.sh")
	if err := os.WriteFile(snap, []byte("export SNAP=loaded\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var info SessionInfo
	h.ok("POST", "/v1/bash/sessions/create", map[string]any{"session_id": "b1", "exec_dir": dir, "snapshot_path": snap}, &info)
	if info.SessionID != "b1" || info.WorkingDir != dir {
		t.Fatalf("%+v", info)
	}
	var d execData
	h.ok("POST", "/v1/bash/exec", map[string]any{"command": "pwd; echo $SNAP", "session_id": "b1"}, &d)
	if str(d.Stdout) != dir+"\nloaded\n" || d.Stderr != nil {
		t.Fatalf("%+v", d)
	}
	// An unknown session_id is created on first use; exec_dir is the cwd.
	h.ok("POST", "/v1/bash/exec", map[string]any{"command": "pwd", "session_id": "fresh", "exec_dir": "/tmp"}, &d)
	if d.SessionID != "fresh" || str(d.Stdout) != "/tmp\n" {
		t.Fatalf("%+v", d)
	}
	// async_mode, write, output by session, kill by session.
	h.ok("POST", "/v1/bash/exec", map[string]any{"command": "read x; echo got $x; sleep 30", "session_id": "b1", "async_mode": true}, &d)
	if d.Status != StatusRunning || d.Stdout != nil {
		t.Fatalf("%+v", d)
	}
	h.ok("POST", "/v1/bash/write", map[string]any{"session_id": "b1", "input": "hi\n"}, nil)
	var o outputData
	h.ok("POST", "/v1/bash/output", map[string]any{"session_id": "b1", "wait": true, "wait_timeout": 5}, &o)
	if o.Stdout != "got hi\n" || o.Command == nil || o.Command.CommandID != d.CommandID || o.Command.Status != StatusRunning || o.SessionID != "b1" {
		t.Fatalf("%+v", o)
	}
	h.ok("POST", "/v1/bash/kill", map[string]any{"session_id": "b1", "signal": "SIGKILL"}, nil)
	h.ok("POST", "/v1/bash/output", map[string]any{"session_id": "b1", "command_id": d.CommandID, "offset": 7, "wait": true, "wait_timeout": 5}, &o)
	if o.Command.Status != StatusCompleted || code(o.Command.ExitCode) != "-1" || o.Stdout != "" {
		t.Fatalf("%+v %+v", o, o.Command)
	}
	h.fails(400, "POST", "/v1/bash/kill", map[string]any{"session_id": "b1"})
	h.fails(400, "POST", "/v1/bash/write", map[string]any{"session_id": "b1", "input": "x"})
	h.fails(422, "POST", "/v1/bash/output", map[string]any{})
	h.fails(404, "POST", "/v1/bash/output", map[string]any{"session_id": "nope"})
	var list []SessionInfo
	h.ok("GET", "/v1/bash/sessions", nil, &list)
	if len(list) != 2 {
		t.Fatalf("%+v", list)
	}
	st, env := h.do("POST", "/v1/bash/sessions/b1/close", nil)
	if st != 200 || !env.Success || string(env.Data) != "null" {
		t.Fatalf("%d %+v", st, env)
	}
	h.fails(404, "POST", "/v1/bash/sessions/b1/close", nil)
	h.fails(400, "POST", "/v1/bash/sessions/create", map[string]any{"snapshot_path": "/no/such/file"})
	// A session without commands reads as empty, with command null.
	h.ok("POST", "/v1/bash/sessions/create", map[string]any{"session_id": "empty"}, nil)
	_, env = h.do("POST", "/v1/bash/output", map[string]any{"session_id": "empty"})
	if !strings.Contains(string(env.Data), `"command":null`) {
		t.Fatalf("%s", env.Data)
	}
}

type shellData struct {
	SessionID string  `json:"session_id"`
	Command   *string `json:"command"`
	Status    string  `json:"status"`
	Output    string  `json:"output"`
	Console   []struct {
		PS1     string `json:"ps1"`
		Command string `json:"command"`
		Output  string `json:"output"`
	} `json:"console"`
	ExitCode *int `json:"exit_code"`
}

func TestV1Shell(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	var d shellData
	st, env := h.do("POST", "/v1/shell/exec", map[string]any{"command": "printf shell-doc-ok"})
	if st != 200 || env.Message != "Command executed" {
		t.Fatalf("%d %+v", st, env)
	}
	h.ok("POST", "/v1/shell/exec", map[string]any{"command": "printf shell-doc-ok"}, &d)
	if d.SessionID == "" || d.Status != "completed" || d.Output != "shell-doc-ok" || code(d.ExitCode) != "0" || d.Command == nil {
		t.Fatalf("%+v", d)
	}
	sid := d.SessionID
	h.ok("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "exit 3"}, &d)
	if d.Status != "completed" || code(d.ExitCode) != "3" || len(d.Console) != 2 || d.Console[0].Output != "shell-doc-ok" || d.Console[1].Command != "exit 3" || d.Console[1].PS1 == "" {
		t.Fatalf("%+v", d)
	}
	h.fails(404, "POST", "/v1/shell/exec", map[string]any{"id": "nope", "command": "true"})

	// no_change_timeout interrupts a quiet command and leaves exit_code null.
	h.ok("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "echo a; sleep 30", "no_change_timeout": 1}, &d)
	if d.Status != "no_change_timeout" || d.ExitCode != nil || d.Output != "a\n" {
		t.Fatalf("%+v", d)
	}
	// hard_timeout maps to the terminal status with a null exit code.
	h.ok("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "sleep 30", "hard_timeout": 0.2}, &d)
	if d.Status != "hard_timeout" || d.ExitCode != nil {
		t.Fatalf("%+v", d)
	}
	// async, view, write (press_enter), wait.
	h.ok("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": `read -p "Name: " name; echo Hello $name`, "async_mode": true}, &d)
	if d.Status != "running" {
		t.Fatalf("%+v", d)
	}
	h.ok("POST", "/v1/shell/view", map[string]any{"id": sid}, &d)
	if d.Status != "running" || d.Command == nil {
		t.Fatalf("%+v", d)
	}
	var ws statusResult
	h.ok("POST", "/v1/shell/write", map[string]any{"id": sid, "input": "Alice"}, &ws)
	h.ok("POST", "/v1/shell/wait", map[string]any{"id": sid, "seconds": 5}, &ws)
	if ws.Status != "completed" {
		t.Fatalf("%+v", ws)
	}
	h.ok("POST", "/v1/shell/view", map[string]any{"id": sid}, &d)
	if d.Output != "Hello Alice\n" || d.Command != nil || code(d.ExitCode) != "0" {
		t.Fatalf("%+v", d)
	}
	h.fails(400, "POST", "/v1/shell/write", map[string]any{"id": sid, "input": "x"})

	// Sessions: create (idempotent), list, stats, update, kill closes.
	var created map[string]string
	dir := t.TempDir()
	h.ok("POST", "/v1/shell/sessions/create", map[string]any{"id": "t1", "exec_dir": dir}, &created)
	if created["session_id"] != "t1" || created["working_dir"] != dir {
		t.Fatalf("%+v", created)
	}
	var sessions struct {
		Sessions map[string]map[string]any `json:"sessions"`
	}
	h.ok("GET", "/v1/shell/sessions", nil, &sessions)
	if len(sessions.Sessions) != 3 || sessions.Sessions["t1"]["working_dir"] != dir || sessions.Sessions["t1"]["status"] != "idle" {
		t.Fatalf("%+v", sessions)
	}
	var stats shellStats
	h.ok("GET", "/v1/shell/sessions/stats", nil, &stats)
	if stats.TotalSessions != 3 || stats.MaxSessions != DefaultMaxSessions || stats.SessionTimeout != 3600 {
		t.Fatalf("%+v", stats)
	}
	h.ok("POST", "/v1/shell/sessions/update", map[string]any{"id": "t1", "no_change_timeout": 1}, nil)
	start := time.Now()
	h.ok("POST", "/v1/shell/exec", map[string]any{"id": "t1", "command": "sleep 30"}, &d)
	if d.Status != "no_change_timeout" || time.Since(start) > 5*time.Second {
		t.Fatalf("%+v", d)
	}
	h.ok("POST", "/v1/shell/exec", map[string]any{"id": "t1", "command": "sleep 30", "async_mode": true}, &d)
	var k shellKillResult
	h.ok("POST", "/v1/shell/kill", map[string]any{"id": "t1"}, &k)
	if k.Status != "terminated" || code(k.ExitCode) != "-1" || code(k.ReturnCode) != "-1" {
		t.Fatalf("%+v", k)
	}
	h.fails(404, "POST", "/v1/shell/kill", map[string]any{"id": "t1"})
	h.fails(200, "DELETE", "/v1/shell/sessions/t1", nil)
	h.ok("DELETE", "/v1/shell/sessions/"+sid, nil, nil)
	h.ok("POST", "/v1/shell/sessions/create", map[string]any{"id": "t2"}, nil)
	h.ok("DELETE", "/v1/shell/sessions", nil, nil)
	sessions.Sessions = nil
	h.ok("GET", "/v1/shell/sessions", nil, &sessions)
	if len(sessions.Sessions) != 0 {
		t.Fatalf("%+v", sessions)
	}
	h.fails(422, "POST", "/v1/shell/view", map[string]any{})
}
