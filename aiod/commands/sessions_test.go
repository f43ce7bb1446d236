package commands

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSessionEnvAndCwd(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	dir := t.TempDir()
	var info SessionInfo
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "s1", "cwd": dir, "env": map[string]string{"FOO": "bar", "BAZ": "1"}}, &info)
	if info.SessionID != "s1" || info.Status != SessionReady || info.WorkingDir != dir || info.CommandCount != 0 || info.CurrentCommand != nil ||
		info.CreatedAt == "" || info.LastUsedAt == "" {
		t.Fatalf("%+v", info)
	}
	d := h.run(map[string]any{"command": "pwd; echo $FOO $BAZ", "session": "s1", "env": map[string]string{"BAZ": "2"}})
	if str(d.Stdout) != dir+"\nbar 2\n" || d.SessionID != "s1" {
		t.Fatalf("%+v", d)
	}
	// A cd does not carry over; a per-command cwd is relative to the session's.
	h.run(map[string]any{"command": "cd /; mkdir -p sub", "session": "s1"})
	if d = h.run(map[string]any{"command": "pwd", "session": "s1"}); str(d.Stdout) != dir+"\n" {
		t.Fatalf("cd carried over: %+v", d)
	}
	if d = h.run(map[string]any{"command": "pwd", "session": "s1", "cwd": "/tmp"}); str(d.Stdout) != "/tmp\n" {
		t.Fatalf("%+v", d)
	}
	// Idempotent for an existing id; an empty body creates a generated one.
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "s1", "cwd": "/"}, &info)
	if info.WorkingDir != dir || info.CommandCount != 4 {
		t.Fatalf("%+v", info)
	}
	h.OK("POST", "/v2/commands/sessions", nil, &info)
	if info.SessionID == "" || info.SessionID == "s1" {
		t.Fatalf("%+v", info)
	}
	h.Fails(400, "POST", "/v2/commands/sessions", map[string]any{"cwd": filepath.Join(dir, "missing")})
	var list []SessionInfo
	h.OK("GET", "/v2/commands/sessions", nil, &list)
	ids := map[string]bool{}
	for _, s := range list {
		ids[s.SessionID] = true
	}
	if !ids["s1"] || !ids[info.SessionID] {
		t.Fatalf("%+v", list)
	}
	h.OK("DELETE", "/v2/commands/sessions/s1", nil, &info)
	if info.Status != SessionClosed {
		t.Fatalf("%+v", info)
	}
	h.Fails(404, "DELETE", "/v2/commands/sessions/s1", nil)
	h.Fails(404, "GET", "/v2/commands/"+d.CommandID, nil)
}

func TestSessionCurrentCommandAndDelete(t *testing.T) {
	h := newHarness(t, Config{}, func(e *Engine) { e.killGrace = 200 * time.Millisecond })
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "busy"}, nil)
	// The shell ignores SIGTERM, so the close must escalate to SIGKILL.
	d := h.run(map[string]any{"command": "trap '' TERM; sleep 30 & wait", "session": "busy", "mode": "async"})
	c, _ := h.p.e.Command(d.CommandID)
	var list []SessionInfo
	h.OK("GET", "/v2/commands/sessions", nil, &list)
	if len(list) != 1 || list[0].CurrentCommand == nil || *list[0].CurrentCommand != "trap '' TERM; sleep 30 & wait" {
		t.Fatalf("%+v", list)
	}
	h.OK("DELETE", "/v2/commands/sessions/busy", nil, nil)
	if st, code := c.State(); st != StatusCompleted || *code != -1 {
		t.Fatalf("%s %v", st, code)
	}
	eventually(t, 5*time.Second, "the group to end", func() bool { return !groupAlive(c.pgid) })
}

func TestSessionLimitEvictsLRU(t *testing.T) {
	h := newHarness(t, Config{MaxSessions: 2}, nil)
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "a"}, nil)
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "b"}, nil)
	h.run(map[string]any{"command": "true", "session": "a"}) // b is now the least recently used
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "c"}, nil)
	h.Fails(404, "DELETE", "/v2/commands/sessions/b", nil)
	for _, id := range []string{"a", "c"} {
		h.run(map[string]any{"command": "sleep 30", "session": id, "mode": "async"})
	}
	// A full table is 400, as published, with a hint naming the limit's
	// variable, so a client can tell it from bad input.
	want := `{"success":false,"message":"Maximum number of sessions (2) reached and all are busy","data":null,` +
		`"hint":"every one of the AIO_BASH_MAX_SESSIONS=2 sessions is running a command: close one ` +
		`(DELETE /v2/commands/sessions/{id}), wait for a command to finish, or raise AIO_BASH_MAX_SESSIONS"}`
	for _, req := range []struct {
		path string
		body map[string]any
	}{
		{"/v2/commands/sessions", map[string]any{"id": "d"}},
		{"/v2/commands", map[string]any{"command": "true"}},
		{"/v1/bash/exec", map[string]any{"command": "true", "session_id": "e"}},
	} {
		st, _, raw := h.Do("POST", req.path, req.body)
		if st != 400 || strings.TrimSpace(string(raw)) != want {
			t.Errorf("%s %v: %d %s", req.path, req.body, st, raw)
		}
	}
}

func TestIdleSessionsReclaimed(t *testing.T) {
	h := newHarness(t, Config{SessionIdle: 100 * time.Millisecond}, nil)
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "idle"}, nil)
	d := h.run(map[string]any{"command": "sleep 0.6", "mode": "async"})
	eventually(t, 3*time.Second, "the idle session to go", func() bool {
		_, err := h.p.e.Session("idle")
		return err != nil
	})
	// A session with a running command is not idle.
	if _, err := h.p.e.Session(d.SessionID); err != nil {
		t.Fatal("busy session reclaimed")
	}
	h.waitDone(d.CommandID)
	eventually(t, 3*time.Second, "the finished session to go", func() bool {
		_, err := h.p.e.Session(d.SessionID)
		return err != nil
	})
}

func TestUserSwitching(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
	h := newHarness(t, Config{Workspace: "/tmp"}, nil)
	d := h.run(map[string]any{"command": "id -un; echo $USER $HOME", "user": "nobody"})
	if !strings.HasPrefix(str(d.Stdout), "nobody\nnobody ") {
		t.Fatalf("%+v", d)
	}
	if msg := h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "true", "user": "no-such-user-xyz"}); msg != "no such user: no-such-user-xyz" {
		t.Fatalf("%q", msg)
	}
	// The daemon's own account (root here) needs no switch.
	if d := h.run(map[string]any{"command": "id -u", "user": "root"}); str(d.Stdout) != "0\n" {
		t.Fatalf("%+v", d)
	}
	// The session keeps the account it first saw.
	if d = h.run(map[string]any{"command": "id -un", "session": d.SessionID}); str(d.Stdout) != "nobody\n" {
		t.Fatalf("%+v", d)
	}
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "u", "user": "nobody"}, nil)
	h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "true", "session": "u", "user": "daemon"})
	h.Fails(400, "POST", "/v2/commands/sessions", map[string]any{"id": "u", "user": "daemon"})
	h.Fails(400, "POST", "/v1/bash/exec", map[string]any{"command": "true", "user": "no-such-user-xyz"})
}

func TestDefaultUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
	h := newHarness(t, Config{Workspace: "/tmp", DefaultUser: "nobody"}, nil)
	if d := h.run(map[string]any{"command": "id -un"}); str(d.Stdout) != "nobody\n" {
		t.Fatalf("%+v", d)
	}
	bad := newHarness(t, Config{DefaultUser: "no-such-user-xyz"}, nil)
	bad.Fails(503, "POST", "/v2/commands", map[string]any{"command": "true"})
}

func TestCloseEndsEverything(t *testing.T) {
	h := newHarness(t, Config{}, func(e *Engine) { e.killGrace = 300 * time.Millisecond })
	var groups []int
	for _, cmd := range []string{"sleep 100 & sleep 100", "trap '' TERM; sleep 100 & wait"} {
		d := h.run(map[string]any{"command": cmd, "mode": "async"})
		c, _ := h.p.e.Command(d.CommandID)
		groups = append(groups, c.pgid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		eventually(t, 5*time.Second, "the group to end", func() bool { return !groupAlive(g) })
	}
	h.Fails(503, "POST", "/v2/commands", map[string]any{"command": "true"})
	if err := h.p.Close(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
}

func TestSessionInfoJSON(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	_, env := h.do("POST", "/v2/commands/sessions", nil)
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(env.Data, &keys)
	if len(keys) != 7 || string(keys["current_command"]) != "null" {
		t.Fatalf("%s", env.Data)
	}
}

func TestBackgroundChildrenEndWithSessionAndClose(t *testing.T) {
	h := newHarness(t, Config{}, func(e *Engine) { e.killGrace = 200 * time.Millisecond; e.drainGrace = 50 * time.Millisecond })
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "bg"}, nil)
	var groups []int
	for _, session := range []string{"bg", ""} {
		d := h.run(map[string]any{"command": "sleep 100 &", "session": session})
		if d.Status != StatusCompleted || code(d.ExitCode) != "0" {
			t.Fatalf("%+v", d)
		}
		c, _ := h.p.e.Command(d.CommandID)
		if !groupAlive(c.pgid) {
			t.Fatal("the background child is gone already")
		}
		groups = append(groups, c.pgid)
	}
	h.OK("DELETE", "/v2/commands/sessions/bg", nil, nil)
	eventually(t, 5*time.Second, "the session's background child to end", func() bool { return !groupAlive(groups[0]) })
	if !groupAlive(groups[1]) {
		t.Fatal("closing one session ended another's background child")
	}
	closePlane(t, h.p)
	eventually(t, 5*time.Second, "Close to end the background child", func() bool { return !groupAlive(groups[1]) })
}

// The registry holds the cap under concurrent creation, and a command
// never runs in a session a concurrent creation has evicted (a session
// made for a command is busy from its creation; one ended before it was
// made busy is not used). So every run either ends with its own exit
// code or is refused as all busy; none is killed on the way (exit code
// -1), and the sessions never exceed the cap.
func TestSessionCapUnderConcurrentRuns(t *testing.T) {
	const max = 3
	h := newHarness(t, Config{MaxSessions: max}, nil)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ran, bad []string
		busy     int
	)
	for i := range 24 {
		wg.Go(func() {
			body := map[string]any{"command": "sleep 0.05; exit 7"}
			if i%2 == 1 {
				body["session"] = "named" + strconv.Itoa(i) // v2 names must exist: refused 404, no session
			}
			st, r, raw := h.Do("POST", "/v2/commands", body)
			n := h.p.e.reg.Len(tier)
			mu.Lock()
			defer mu.Unlock()
			if n > max {
				bad = append(bad, "sessions over the cap: "+strconv.Itoa(n))
			}
			var d execData
			switch {
			case i%2 == 1 && st == 404:
			case st == 200 && json.Unmarshal(r.Data, &d) == nil && code(d.ExitCode) == "7":
				ran = append(ran, d.SessionID)
			case st == 400 && strings.HasPrefix(r.Message, "Maximum number of sessions (3) reached"):
				busy++
			default:
				bad = append(bad, strconv.Itoa(st)+" "+string(raw))
			}
		})
	}
	wg.Wait()
	if len(bad) > 0 || len(ran) == 0 {
		t.Fatalf("ran %d, busy %d, wrong: %v", len(ran), busy, bad)
	}
	var list []SessionInfo
	if h.OK("GET", "/v2/commands/sessions", nil, &list); len(list) > max {
		t.Fatalf("%d sessions listed", len(list))
	}
}
