package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestV1Bash(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	dir := t.TempDir()
	snap := filepath.Join(dir, "snap.sh")
	if err := os.WriteFile(snap, []byte("export SNAP=loaded\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var info SessionInfo
	h.OK("POST", "/v1/bash/sessions/create", map[string]any{"session_id": "b1", "exec_dir": dir, "snapshot_path": snap}, &info)
	if info.SessionID != "b1" || info.WorkingDir != dir {
		t.Fatalf("%+v", info)
	}
	var d execData
	h.OK("POST", "/v1/bash/exec", map[string]any{"command": "pwd; echo $SNAP", "session_id": "b1"}, &d)
	if str(d.Stdout) != dir+"\nloaded\n" || d.Stderr != nil {
		t.Fatalf("%+v", d)
	}
	// An unknown session_id is created on first use; exec_dir is the cwd.
	h.OK("POST", "/v1/bash/exec", map[string]any{"command": "pwd", "session_id": "fresh", "exec_dir": "/tmp"}, &d)
	if d.SessionID != "fresh" || str(d.Stdout) != "/tmp\n" {
		t.Fatalf("%+v", d)
	}
	// async_mode, write, output by session, kill by session.
	h.OK("POST", "/v1/bash/exec", map[string]any{"command": "read x; echo got $x; sleep 30", "session_id": "b1", "async_mode": true}, &d)
	if d.Status != StatusRunning || d.Stdout != nil {
		t.Fatalf("%+v", d)
	}
	h.OK("POST", "/v1/bash/write", map[string]any{"session_id": "b1", "input": "hi\n"}, nil)
	var o outputData
	h.OK("POST", "/v1/bash/output", map[string]any{"session_id": "b1", "wait": true, "wait_timeout": 5}, &o)
	if o.Stdout != "got hi\n" || o.Command == nil || o.Command.CommandID != d.CommandID || o.Command.Status != StatusRunning || o.SessionID != "b1" {
		t.Fatalf("%+v", o)
	}
	h.OK("POST", "/v1/bash/kill", map[string]any{"session_id": "b1", "signal": "SIGKILL"}, nil)
	h.OK("POST", "/v1/bash/output", map[string]any{"session_id": "b1", "command_id": d.CommandID, "offset": 7, "wait": true, "wait_timeout": 5}, &o)
	if o.Command.Status != StatusCompleted || code(o.Command.ExitCode) != "-1" || o.Stdout != "" {
		t.Fatalf("%+v %+v", o, o.Command)
	}
	h.Fails(400, "POST", "/v1/bash/kill", map[string]any{"session_id": "b1"})
	h.Fails(400, "POST", "/v1/bash/write", map[string]any{"session_id": "b1", "input": "x"})
	h.Fails(422, "POST", "/v1/bash/output", map[string]any{})
	h.Fails(404, "POST", "/v1/bash/output", map[string]any{"session_id": "nope"})
	var list []SessionInfo
	h.OK("GET", "/v1/bash/sessions", nil, &list)
	if len(list) != 2 {
		t.Fatalf("%+v", list)
	}
	st, env := h.do("POST", "/v1/bash/sessions/b1/close", nil)
	if st != 200 || !env.Success || string(env.Data) != "null" {
		t.Fatalf("%d %+v", st, env)
	}
	h.Fails(404, "POST", "/v1/bash/sessions/b1/close", nil)
	h.Fails(400, "POST", "/v1/bash/sessions/create", map[string]any{"snapshot_path": "/no/such/file"})
	// A session without commands reads as empty, with command null.
	h.OK("POST", "/v1/bash/sessions/create", map[string]any{"session_id": "empty"}, nil)
	_, env = h.do("POST", "/v1/bash/output", map[string]any{"session_id": "empty"})
	if !strings.Contains(string(env.Data), `"command":null`) {
		t.Fatalf("%s", env.Data)
	}
}
