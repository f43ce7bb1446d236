package aiod

import (
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"

	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// processesWith lists the pids whose command line contains marker.
func processesWith(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && bytes.Contains(st, []byte(") Z ")) {
			continue // a zombie awaiting its parent is gone already
		}
		if bytes.Contains(b, []byte(marker)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// noneLeft waits up to 10 s for every process carrying marker to go,
// and for several looks in a row to find none (one look may fall
// between a fork and the child's exec).
func noneLeft(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clean := 0; clean < 5; time.Sleep(20 * time.Millisecond) {
		clean++
		if len(processesWith(marker)) > 0 {
			clean = 0
		}
		if time.Now().After(deadline) {
			t.Errorf("processes with %q left behind: %v", marker, processesWith(marker))
			return
		}
	}
}

// running waits up to 10 s until at least n processes carry marker.
func running(t *testing.T, marker string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(processesWith(marker)) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes with %q, want %d", len(processesWith(marker)), marker, n)
		}
	}
}

// waitDone long-polls GET /v2/commands/{id} from the offsets read so far
// until the command has ended, and returns the last answer with all of
// stdout and stderr.
func waitDone(t *testing.T, a *aio, id string) (map[string]any, string, string) {
	t.Helper()
	var out, errOut string
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, e := a.call("GET", "/v2/commands/{command_id}", fmt.Sprintf("/v2/commands/%s?wait=true&wait_timeout=5&offset=%d&stderr_offset=%d", id, len(out), len(errOut)), nil)
		m := e.obj()
		out += m["stdout"].(string)
		errOut += m["stderr"].(string)
		if c, _ := m["command"].(map[string]any); c["status"] != "running" || time.Now().After(deadline) {
			return m, out, errOut
		}
	}
}

// TestAiodCommands checks the commands plane on the real binary:
// requirements 5-7 and 13-23 of the spec, sessions, streaming, v1.
func TestAiodCommands(t *testing.T) {
	ws := t.TempDir()
	d := startAiod(t, nil, "--workspace", ws)
	a := &aio{t: t, base: d.URL}

	t.Run("422 for a missing command, with and without a body", func(t *testing.T) {
		want := `{"success":false,"message":"Request data validation failed","data":null,"errors":[{"location":["body","command"],"message":"missing field ` + "`command`" + ` at line 1 column 2","type":"value_error.missing"}]}`
		for _, body := range []any{"{}", nil} {
			code, e := a.call("POST", "/v2/commands", "/v2/commands", body)
			if code != 422 || strings.TrimSpace(string(e.raw)) != want {
				t.Errorf("%v: %d %s", body, code, e.raw)
			}
		}
		code, e := a.call("POST", "/v2/commands", "/v2/commands", `{"command":"x","shell":"zsh"}`)
		if code != 422 || len(e.Errors) != 1 || e.Errors[0].Message != "unknown variant `zsh`, expected one of `auto`, `bash`, `sh`, `powershell`, `cmd`, `none` at line 1 column 28" ||
			strings.Join(e.Errors[0].Location, ",") != "body,shell" {
			t.Errorf("enum: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v2/commands", "/v2/commands", `{"command":"x","timeout":"soon"}`)
		if code != 422 || len(e.Errors) != 1 || !strings.HasPrefix(e.Errors[0].Message, `invalid type: string "soon", expected f64 at line 1 column`) {
			t.Errorf("type error: %d %s", code, e.raw)
		}
	})

	t.Run("exit code is data (v2 and v1)", func(t *testing.T) {
		code, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "echo out; echo err >&2; exit 3"})
		m := e.obj()
		if code != 200 || !e.Success || e.Message != "Operation successful" || e.Hint != nil || m["status"] != "completed" || m["exit_code"] != 3.0 ||
			m["stdout"] != "out\n" || m["stderr"] != "err\n" || m["output"] != "out\nerr\n" || m["offset"] != 4.0 || m["stderr_offset"] != 4.0 {
			t.Errorf("v2: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v1/bash/exec", "/v1/bash/exec", map[string]any{"command": "exit 3"})
		m = e.obj()
		if code != 200 || !e.Success || m["status"] != "completed" || m["exit_code"] != 3.0 || m["stdout"] != nil {
			t.Errorf("v1: %d %s", code, e.raw)
		}
	})

	t.Run("timeout returns running, the command goes on", func(t *testing.T) {
		start := time.Now()
		_, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "echo early; sleep 1.5; echo late", "timeout": 0.5})
		m := e.obj()
		if took := time.Since(start); m["status"] != "running" || m["exit_code"] != nil || m["stdout"] != "early\n" || took > 1400*time.Millisecond {
			t.Fatalf("%s after %s", e.raw, took)
		}
		id := m["command_id"].(string)
		got, _, _ := waitDone(t, a, id)
		cmd, _ := got["command"].(map[string]any)
		if cmd["status"] != "completed" || cmd["exit_code"] != 0.0 || got["offset"] != 11.0 {
			t.Errorf("after wait: %v", got)
		}
		_, e = a.call("GET", "/v2/commands/{command_id}", "/v2/commands/"+id, nil)
		if got := e.obj(); got["stdout"] != "early\nlate\n" {
			t.Errorf("from offset 0: %s", e.raw)
		}
		_, e = a.call("GET", "/v2/commands/{command_id}", "/v2/commands/"+id+"?offset=6", nil)
		if got := e.obj(); got["stdout"] != "late\n" || got["stdout_start_offset"] != 0.0 || got["stdout_gap"] != false {
			t.Errorf("from offset 6: %s", e.raw)
		}
	})

	t.Run("hard_timeout kills the whole tree", func(t *testing.T) {
		marker := "97.4242"
		_, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{
			"command": "sleep " + marker + " & bash -c 'sleep " + marker + "' & sleep " + marker, "hard_timeout": 0.5})
		if m := e.obj(); m["status"] != "timed_out" || m["exit_code"] != -1.0 || !e.Success {
			t.Errorf("%s", e.raw)
		}
		noneLeft(t, marker)
	})

	t.Run("kill, then kill and stdin on an ended command", func(t *testing.T) {
		marker := "96.4242"
		_, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "sleep " + marker + " & sleep " + marker, "mode": "async"})
		m := e.obj()
		if m["status"] != "running" || m["command_id"] == nil || m["exit_code"] != nil {
			t.Fatalf("async: %s", e.raw)
		}
		id := m["command_id"].(string)
		running(t, marker, 2)
		code, e := a.call("POST", "/v2/commands/{command_id}/kill", "/v2/commands/"+id+"/kill", map[string]any{"signal": "SIGKILL"})
		if code != 200 || !e.Success {
			t.Errorf("kill: %d %s", code, e.raw)
		}
		if got, _, _ := waitDone(t, a, id); got["command"].(map[string]any)["status"] != "completed" || got["command"].(map[string]any)["exit_code"] != -1.0 {
			t.Errorf("after kill: %v", got)
		}
		noneLeft(t, marker)
		if code, e := a.call("POST", "/v2/commands/{command_id}/kill", "/v2/commands/"+id+"/kill", nil); code != 400 || e.Success {
			t.Errorf("second kill: %d %s", code, e.raw)
		}
		if code, e := a.call("POST", "/v2/commands/{command_id}/stdin", "/v2/commands/"+id+"/stdin", map[string]any{"input": "x"}); code != 400 || e.Success {
			t.Errorf("stdin after end: %d %s", code, e.raw)
		}
	})

	t.Run("stdin reaches a running command", func(t *testing.T) {
		_, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "read line; echo got:$line", "mode": "async"})
		id := e.obj()["command_id"].(string)
		if code, e := a.call("POST", "/v2/commands/{command_id}/stdin", "/v2/commands/"+id+"/stdin", map[string]any{"input": "hello\n"}); code != 200 || !e.Success {
			t.Fatalf("stdin: %d %s", code, e.raw)
		}
		if _, out, _ := waitDone(t, a, id); out != "got:hello\n" {
			t.Errorf("%q", out)
		}
	})

	t.Run("unknown ids are 404", func(t *testing.T) {
		for _, c := range []struct{ method, tmpl, path string }{
			{"GET", "/v2/commands/{command_id}", "/v2/commands/nope"},
			{"POST", "/v2/commands/{command_id}/stdin", "/v2/commands/nope/stdin"},
			{"POST", "/v2/commands/{command_id}/kill", "/v2/commands/nope/kill"},
			{"DELETE", "/v2/commands/sessions/{session_id}", "/v2/commands/sessions/nope"},
		} {
			var body any
			if strings.HasSuffix(c.path, "stdin") {
				body = map[string]any{"input": "x"}
			}
			if code, e := a.call(c.method, c.tmpl, c.path, body); code != 404 || e.Success {
				t.Errorf("%s %s: %d %s", c.method, c.path, code, e.raw)
			}
		}
	})

	t.Run("shells, args and users", func(t *testing.T) {
		code, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "printf", "args": []string{"%s-%s", "a b", "c"}, "shell": "none"})
		if m := e.obj(); code != 200 || m["stdout"] != "a b-c" {
			t.Errorf("none+args: %d %s", code, e.raw)
		}
		if code, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "echo", "args": []string{"x"}}); code != 400 || e.Success {
			t.Errorf("args without none: %d %s", code, e.raw)
		}
		if code, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "echo x", "shell": "powershell"}); code != 503 || !strings.Contains(e.Message, "powershell") {
			t.Errorf("missing shell: %d %s", code, e.raw)
		}
		_, e = a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "echo $0", "shell": "sh"})
		if m := e.obj(); m["exit_code"] != 0.0 || !strings.Contains(m["stdout"].(string), "sh") {
			t.Errorf("sh: %s", e.raw)
		}
		if code, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "id", "user": "no-such-user-xyz"}); code != 400 || e.Message != "no such user: no-such-user-xyz" {
			t.Errorf("unknown user: %d %s", code, e.raw)
		}
		if os.Geteuid() == 0 {
			if code, e := a.call("POST", "/v2/commands/sessions", "/v2/commands/sessions", map[string]any{"id": "as-nobody", "cwd": "/tmp"}); code != 200 {
				t.Fatalf("session: %d %s", code, e.raw)
			}
			_, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "id -un", "user": "nobody", "session": "as-nobody"})
			if m := e.obj(); m["stdout"] != "nobody\n" {
				t.Errorf("as nobody: %s", e.raw)
			}
			if code, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "id -un", "user": "root", "session": "as-nobody"}); code != 400 || e.Success {
				t.Errorf("user change on a session: %d %s", code, e.raw)
			}
		}
	})

	t.Run("sessions keep env and cwd; cd does not carry over", func(t *testing.T) {
		dir := t.TempDir()
		code, e := a.call("POST", "/v2/commands/sessions", "/v2/commands/sessions", map[string]any{"id": "s1", "cwd": dir, "env": map[string]string{"GREETING": "hi"}})
		if m := e.obj(); code != 200 || m["session_id"] != "s1" || m["working_dir"] != dir || m["status"] != "ready" {
			t.Fatalf("create: %d %s", code, e.raw)
		}
		if code, _ := a.call("POST", "/v2/commands/sessions", "/v2/commands/sessions", map[string]any{"id": "s1"}); code != 200 {
			t.Errorf("create again is not idempotent: %d", code)
		}
		if code, e := a.call("POST", "/v2/commands/sessions", "/v2/commands/sessions", nil); code != 200 || !e.Success {
			t.Errorf("empty body: %d %s", code, e.raw)
		}
		_, e = a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "echo $GREETING $(pwd); cd /", "session": "s1"})
		if m := e.obj(); m["stdout"] != "hi "+dir+"\n" || m["session_id"] != "s1" {
			t.Errorf("first: %s", e.raw)
		}
		_, e = a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "pwd; echo $GREETING", "session": "s1", "env": map[string]string{"GREETING": "over"}})
		if m := e.obj(); m["stdout"] != dir+"\nover\n" {
			t.Errorf("second: %s", e.raw)
		}
		code, e = a.call("GET", "/v2/commands/sessions", "/v2/commands/sessions", nil)
		if code != 200 || !bytes.Contains(e.Data, []byte(`"session_id":"s1"`)) {
			t.Errorf("list: %d %s", code, e.raw)
		}
		if code, e := a.call("DELETE", "/v2/commands/sessions/{session_id}", "/v2/commands/sessions/s1", nil); code != 200 || !e.Success {
			t.Errorf("delete: %d %s", code, e.raw)
		}
		_, e = a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "pwd"})
		if m := e.obj(); m["stdout"] != ws+"\n" {
			t.Errorf("a command without a session or cwd runs in the workspace: %s", e.raw)
		}
	})

	t.Run("max_output_length keeps both ends, offsets count every byte", func(t *testing.T) {
		_, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "head -c 3000 /dev/zero | tr '\\0' a; printf END", "max_output_length": 100})
		m := e.obj()
		out := m["stdout"].(string)
		if !strings.Contains(out, "\n... output truncated ...\n") || !strings.HasSuffix(out, "END") || !strings.HasPrefix(out, "aaaa") || len(out) > 140 || m["offset"] != 3003.0 {
			t.Errorf("%d bytes: %q offset %v", len(out), out, m["offset"])
		}
	})

	t.Run("ndjson stream", func(t *testing.T) {
		resp, body := a.raw("POST", "/v2/commands", map[string]any{"command": "echo one; echo two >&2; exit 4"}, "Accept", "application/x-ndjson")
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
			t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var frames []map[string]any
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			var f map[string]any
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				t.Fatalf("frame %q: %v", sc.Text(), err)
			}
			frames = append(frames, f)
		}
		if len(frames) < 3 || frames[0]["type"] != "started" || frames[0]["command_id"] == nil || frames[len(frames)-1]["type"] != "exit" {
			t.Fatalf("frames: %s", body)
		}
		streams := map[string]string{}
		for _, f := range frames {
			if f["type"] == "output" {
				b, err := base64.StdEncoding.DecodeString(f["data"].(string))
				if err != nil {
					t.Errorf("output data is not base64: %v", f)
				}
				streams[f["stream"].(string)] += string(b)
			}
		}
		last := frames[len(frames)-1]
		if streams["stdout"] != "one\n" || streams["stderr"] != "two\n" || last["exit_code"] != 4.0 || last["status"] != "completed" || last["stdout_offset"] != 4.0 {
			t.Errorf("frames: %s", body)
		}
	})

	t.Run("a client that leaves a streamed sync command kills it", func(t *testing.T) {
		marker := "95.4242"
		req, _ := http.NewRequest("POST", a.base+"/v2/commands", strings.NewReader(`{"command":"sleep `+marker+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/x-ndjson")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		if !strings.Contains(line, `"started"`) {
			t.Errorf("first frame %q", line)
		}
		for deadline := time.Now().Add(5 * time.Second); len(processesWith(marker)) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) { // between fork and exec the child still reads as aiod
				t.Fatal("the command is not running")
			}
		}
		resp.Body.Close()
		noneLeft(t, marker)
	})

	t.Run("v1 bash and shell", func(t *testing.T) {
		_, e := a.call("POST", "/v1/bash/exec", "/v1/bash/exec", map[string]any{"command": "echo v1; sleep 0.3; echo done", "async_mode": true, "exec_dir": ws})
		m := e.obj()
		sid, cid := m["session_id"].(string), m["command_id"].(string)
		var out string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			_, e = a.call("POST", "/v1/bash/output", "/v1/bash/output", map[string]any{"session_id": sid, "command_id": cid, "wait": true, "wait_timeout": 5, "offset": len(out)})
			m := e.obj()
			out += m["stdout"].(string)
			if m["command"].(map[string]any)["status"] != "running" {
				break
			}
		}
		if out != "v1\ndone\n" {
			t.Errorf("output: %q", out)
		}
		code, e := a.call("POST", "/v1/shell/exec", "/v1/shell/exec", map[string]any{"command": "echo shell; exit 2"})
		if m := e.obj(); code != 200 || !e.Success || m["status"] != "completed" || m["exit_code"] != 2.0 || !strings.Contains(fmt.Sprint(m["output"]), "shell") {
			t.Errorf("shell exec: %d %s", code, e.raw)
		}
		code, e = a.call("GET", "/v1/bash/sessions", "/v1/bash/sessions", nil)
		if code != 200 || !e.Success {
			t.Errorf("sessions: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v1/bash/sessions/create", "/v1/bash/sessions/create", map[string]any{"session_id": "v1s", "exec_dir": ws})
		if m := e.obj(); code != 200 || m["session_id"] != "v1s" || m["working_dir"] != ws {
			t.Fatalf("v1 create: %d %s", code, e.raw)
		}
		a.call("POST", "/v1/bash/exec", "/v1/bash/exec", map[string]any{"command": "read x; echo got $x; sleep 60", "session_id": "v1s", "async_mode": true})
		if code, e := a.call("POST", "/v1/bash/write", "/v1/bash/write", map[string]any{"session_id": "v1s", "input": "hi\n"}); code != 200 || !e.Success {
			t.Errorf("v1 write: %d %s", code, e.raw)
		}
		_, e = a.call("POST", "/v1/bash/output", "/v1/bash/output", map[string]any{"session_id": "v1s", "wait": true, "wait_timeout": 5})
		if m := e.obj(); m["stdout"] != "got hi\n" {
			t.Errorf("v1 output after write: %s", e.raw)
		}
		if code, e := a.call("POST", "/v1/bash/kill", "/v1/bash/kill", map[string]any{"session_id": "v1s", "signal": "SIGKILL"}); code != 200 || !e.Success {
			t.Errorf("v1 kill: %d %s", code, e.raw)
		}
		if code, e := a.call("POST", "/v1/bash/sessions/{session_id}/close", "/v1/bash/sessions/v1s/close", nil); code != 200 || !e.Success {
			t.Errorf("v1 close: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v1/shell/sessions/create", "/v1/shell/sessions/create", map[string]any{"id": "sh1", "exec_dir": ws})
		if code != 200 || !e.Success {
			t.Fatalf("shell create: %d %s", code, e.raw)
		}
		a.call("POST", "/v1/shell/exec", "/v1/shell/exec", map[string]any{"id": "sh1", "command": "read y; echo shell $y", "async_mode": true})
		a.call("POST", "/v1/shell/write", "/v1/shell/write", map[string]any{"id": "sh1", "input": "there", "press_enter": true})
		code, e = a.call("POST", "/v1/shell/wait", "/v1/shell/wait", map[string]any{"id": "sh1", "seconds": 5})
		if code != 200 || !e.Success {
			t.Errorf("shell wait: %d %s", code, e.raw)
		}
		code, e = a.call("POST", "/v1/shell/view", "/v1/shell/view", map[string]any{"id": "sh1"})
		if code != 200 || !strings.Contains(string(e.Data), "shell there") {
			t.Errorf("shell view: %d %s", code, e.raw)
		}
		for _, c := range []struct{ method, path string }{{"GET", "/v1/shell/sessions"}, {"GET", "/v1/shell/sessions/stats"}} {
			if code, e := a.call(c.method, c.path, c.path, nil); code != 200 || !e.Success {
				t.Errorf("%s: %d %s", c.path, code, e.raw)
			}
		}
		if code, e := a.call("POST", "/v1/shell/sessions/update", "/v1/shell/sessions/update", map[string]any{"id": "sh1", "exec_dir": "/tmp"}); code != 200 {
			t.Errorf("shell update: %d %s", code, e.raw)
		}
		if code, e := a.call("POST", "/v1/shell/kill", "/v1/shell/kill", map[string]any{"id": "sh1"}); code != 200 || !e.Success {
			t.Errorf("shell kill: %d %s", code, e.raw)
		}
		a.call("POST", "/v1/shell/sessions/create", "/v1/shell/sessions/create", map[string]any{"id": "sh2"})
		if code, e := a.call("DELETE", "/v1/shell/sessions/{session_id}", "/v1/shell/sessions/sh2", nil); code != 200 || !e.Success {
			t.Errorf("shell delete: %d %s", code, e.raw)
		}
		if code, e := a.call("DELETE", "/v1/shell/sessions", "/v1/shell/sessions", nil); code != 200 || !e.Success {
			t.Errorf("shell delete all: %d %s", code, e.raw)
		}
	})
}

// TestAiodShutdownEndsChildren: SIGTERM to the daemon ends every process
// tree it started, async ones included.
func TestAiodShutdownEndsChildren(t *testing.T) {
	d := startAiod(t, nil, "--workspace", t.TempDir())
	a := &aio{t: t, base: d.URL}
	marker := "94.4242"
	for i := 0; i < 3; i++ {
		code, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "sleep " + marker + " & sleep " + marker, "mode": "async"})
		if code != 200 || e.obj()["status"] != "running" {
			t.Fatalf("%d %s", code, e.raw)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); len(processesWith(marker)) < 6; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes running, want 6", len(processesWith(marker)))
		}
	}
	d.Stop(t)
	noneLeft(t, marker)
}

// sessionIDs lists the live command sessions.
func sessionIDs(t *testing.T, a *aio) []string {
	t.Helper()
	_, e := a.call("GET", "/v2/commands/sessions", "/v2/commands/sessions", nil)
	var list []struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(e.Data, &list); err != nil {
		t.Fatalf("sessions: %s", e.raw)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.SessionID)
	}
	return ids
}

// TestAiodSessionLimits: AIO_BASH_MAX_SESSIONS evicts the least recently
// used idle session and refuses a new one when all are busy;
// AIO_BASH_SESSION_TIMEOUT_SECS reclaims idle sessions.
func TestAiodSessionLimits(t *testing.T) {
	d := startAiod(t, []string{"AIO_BASH_MAX_SESSIONS=2", "AIO_BASH_SESSION_TIMEOUT_SECS=2"}, "--workspace", t.TempDir())
	a := &aio{t: t, base: d.URL}
	for _, id := range []string{"a", "b"} {
		if code, e := a.call("POST", "/v2/commands/sessions", "/v2/commands/sessions", map[string]any{"id": id}); code != 200 {
			t.Fatalf("%s: %d %s", id, code, e.raw)
		}
	}
	a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "true", "session": "a"}) // a is now the most recent
	if code, e := a.call("POST", "/v2/commands/sessions", "/v2/commands/sessions", map[string]any{"id": "c"}); code != 200 {
		t.Fatalf("c: %d %s", code, e.raw)
	}
	if ids := strings.Join(sessionIDs(t, a), ","); strings.Contains(ids, "b") || !strings.Contains(ids, "a") || !strings.Contains(ids, "c") {
		t.Errorf("after evicting the LRU idle session: %s", ids)
	}
	marker := "93.4242"
	for _, id := range []string{"a", "c"} {
		if code, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "sleep " + marker, "session": id, "mode": "async"}); code != 200 {
			t.Fatalf("busy %s: %d %s", id, code, e.raw)
		}
	}
	full := `{"success":false,"message":"Maximum number of sessions (2) reached and all are busy","data":null,` +
		`"hint":"every one of the AIO_BASH_MAX_SESSIONS=2 sessions is running a command: close one ` +
		`(DELETE /v2/commands/sessions/{id}), wait for a command to finish, or raise AIO_BASH_MAX_SESSIONS"}`
	if code, e := a.call("POST", "/v2/commands/sessions", "/v2/commands/sessions", map[string]any{"id": "d"}); code != 400 || strings.TrimSpace(string(e.raw)) != full {
		t.Errorf("all busy: %d %s", code, e.raw)
	}
	if code, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "true"}); code != 400 || strings.TrimSpace(string(e.raw)) != full {
		t.Errorf("anonymous session while all are busy: %d %s", code, e.raw)
	}
	for _, id := range []string{"a", "c"} {
		a.call("DELETE", "/v2/commands/sessions/{session_id}", "/v2/commands/sessions/"+id, nil)
	}
	noneLeft(t, marker)
	a.call("POST", "/v2/commands/sessions", "/v2/commands/sessions", map[string]any{"id": "idle"})
	deadline := time.Now().Add(10 * time.Second)
	for strings.Contains(strings.Join(sessionIDs(t, a), ","), "idle") {
		if time.Now().After(deadline) {
			t.Fatal("an idle session was not reclaimed")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAiodStartForms: `aiod start` with AIO_HOST/AIO_PORT, and a daemon
// that is not root refusing to run a command as another account.
func TestAiodStartForms(t *testing.T) {
	bin := harness.Bin(t, "aiod")
	startAiod(t, nil) // builds the binary
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "start")
	cmd.Env = append(append(os.Environ(), harness.PinnedPorts(t)...), "AIO_HOST=127.0.0.1", fmt.Sprintf("AIO_PORT=%d", port))
	p := harness.Run(t, cmd, true)
	if p.Addr != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Errorf("listening on %s, want port %d", p.Addr, port)
	}
	if code, body := get(t, p.URL+"/health"); code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("health: %d %s", code, body)
	}
	if os.Geteuid() != 0 {
		return
	}
	dir, err := os.MkdirTemp("", "aiod-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	src, _ := os.ReadFile(bin)
	nbin := filepath.Join(dir, "aiod")
	os.WriteFile(nbin, src, 0o755)
	ncmd := exec.Command(nbin, "--port", "0", "--workspace", "/tmp")
	ncmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	ncmd.Env = append(os.Environ(), "AIO_API_KEY=nobody-key-1234")
	nobody := &aio{t: t, base: harness.Run(t, ncmd, true).URL, key: "nobody-key-1234"}
	// The daemon is not dumpable: a command of its own account cannot
	// read the key back from /proc/<daemon>/environ.
	_, e0 := nobody.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "cat /proc/$PPID/environ; echo; env"})
	if m := e0.obj(); strings.Contains(fmt.Sprint(m["stdout"]), "nobody-key-1234") || !strings.Contains(fmt.Sprint(m["stderr"]), "Permission denied") {
		t.Errorf("the key is readable from the daemon's environ: %s", e0.raw)
	}
	code, e := nobody.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "id", "user": "root"})
	if code != 400 || !strings.HasPrefix(e.Message, "cannot run as root: aiod is running as uid 65534") {
		t.Errorf("non-root daemon switching user: %d %s", code, e.raw)
	}
	_, e = nobody.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "id -u"})
	if e.obj()["stdout"] != "65534\n" {
		t.Errorf("own account: %s", e.raw)
	}
}

// TestAiodCommandIsolation: the daemon's key never reaches a command, and
// a child that leaves the process group (setsid) still ends with its
// command, on kill, on hard_timeout and at shutdown.
func TestAiodCommandIsolation(t *testing.T) {
	d := startAiod(t, []string{"AIO_API_KEY=very-secret-key"}, "--workspace", t.TempDir())
	a := &aio{t: t, base: d.URL, key: "very-secret-key"}
	_, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "env"})
	if out := e.obj()["stdout"].(string); strings.Contains(out, "very-secret-key") || !strings.Contains(out, "PATH=") {
		t.Errorf("the key reached a command's environment:\n%s", out)
	}

	if code, body := get(t, d.URL+"/metrics", "X-API-Key", "very-secret-key"); code != 200 ||
		!strings.Contains(body, `command_exec_total{status="completed"} 1`) || !strings.Contains(body, "command_exec_duration_seconds_bucket") {
		t.Errorf("command metrics: %d\n%.600s", code, body)
	}

	marker := "92.4242"
	_, e = a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "setsid sleep " + marker + " & sleep " + marker, "mode": "async"})
	id := e.obj()["command_id"].(string)
	running(t, marker, 2)
	a.call("POST", "/v2/commands/{command_id}/kill", "/v2/commands/"+id+"/kill", map[string]any{"signal": "SIGKILL"})
	noneLeft(t, marker)

	marker = "91.4242"
	_, e = a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "setsid sleep " + marker + " & sleep " + marker, "hard_timeout": 0.5})
	if e.obj()["status"] != "timed_out" {
		t.Errorf("hard timeout: %s", e.raw)
	}
	noneLeft(t, marker)

	marker = "90.4242"
	a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"command": "setsid sleep " + marker + " & sleep " + marker, "mode": "async"})
	running(t, marker, 2)
	d.Stop(t)
	noneLeft(t, marker)
}

// TestAiodCommandsKillEscalates: on the real binary, a SIGTERM kill of
// a tree that ignores SIGTERM (the shell, a subshell, a setsid child)
// ends it with SIGKILL after AIO_BASH_KILL_GRACE_SECS, the command reads
// killed, and a second kill reaches what a first one left.
func TestAiodCommandsKillEscalates(t *testing.T) {
	d := startAiod(t, []string{"AIO_BASH_KILL_GRACE_SECS=1"}, "--workspace", t.TempDir())
	a := &aio{t: t, base: d.URL}
	marker := "89.4243"
	_, e := a.call("POST", "/v2/commands", "/v2/commands", map[string]any{"mode": "async",
		"command": "trap '' TERM; (trap '' TERM; sleep " + marker + ") & setsid bash -c \"trap '' TERM; sleep " + marker + "\" & sleep " + marker})
	id := e.obj()["command_id"].(string)
	running(t, marker, 3)
	if code, e := a.call("POST", "/v2/commands/{command_id}/kill", "/v2/commands/"+id+"/kill", map[string]any{"signal": "SIGTERM"}); code != 200 || !e.Success {
		t.Fatalf("kill: %d %s", code, e.raw)
	}
	if got, _, _ := waitDone(t, a, id); got["command"].(map[string]any)["status"] != "completed" || got["command"].(map[string]any)["exit_code"] != -1.0 {
		t.Errorf("after kill: %v", got)
	}
	noneLeft(t, marker)
	if code, e := a.call("POST", "/v2/commands/{command_id}/kill", "/v2/commands/"+id+"/kill", nil); code != 400 || e.Success {
		t.Errorf("kill with nothing left: %d %s", code, e.raw)
	}
}
