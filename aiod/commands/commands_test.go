package commands

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestMissingCommandIs422(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	for _, body := range []any{"{}", nil} {
		st, env := h.do("POST", "/v2/commands", body)
		if st != 422 || env.Success || len(env.Errors) != 1 {
			t.Fatalf("%v: %d %+v", body, st, env)
		}
		e := env.Errors[0]
		if strings.Join(e.Location, ",") != "body,command" || e.Message != "missing field `command` at line 1 column 2" || e.Type != "value_error.missing" {
			t.Fatalf("errors[0] = %+v", e)
		}
		if _, ok := env.raw["hint"]; ok {
			t.Fatal("422 carries a hint key")
		}
	}
}

func TestExitCodeIsData(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	for _, path := range []string{"/v2/commands", "/v1/bash/exec"} {
		var d execData
		h.OK("POST", path, map[string]any{"command": "exit 3"}, &d)
		if d.Status != StatusCompleted || code(d.ExitCode) != "3" {
			t.Fatalf("%s: %+v", path, d)
		}
	}
}

func TestRunResultFields(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	st, env := h.do("POST", "/v2/commands", map[string]any{"command": "echo out; echo err >&2"})
	if st != 200 || env.Message != "Operation successful" || env.Hint != nil {
		t.Fatalf("%d %+v", st, env)
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(env.Data, &keys)
	for _, k := range []string{"session_id", "command_id", "command", "status", "stdout", "stderr", "output", "exit_code", "offset", "stderr_offset"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("data lacks %s", k)
		}
	}
	if len(keys) != 10 {
		t.Errorf("data has %d keys: %s", len(keys), env.Data)
	}
	var d execData
	_ = json.Unmarshal(env.Data, &d)
	if str(d.Stdout) != "out\n" || str(d.Stderr) != "err\n" || str(d.Output) != "out\nerr\n" || d.Offset != 4 || d.StderrOffset != 4 ||
		code(d.ExitCode) != "0" || d.Command != "echo out; echo err >&2" || d.SessionID == "" || d.CommandID == "" {
		t.Fatalf("%+v", d)
	}
	// v1 answers null for empty streams.
	var v1 execData
	h.OK("POST", "/v1/bash/exec", map[string]any{"command": "true"}, &v1)
	if v1.Stdout != nil || v1.Stderr != nil || v1.Output != nil || code(v1.ExitCode) != "0" {
		t.Fatalf("v1: %+v", v1)
	}
	var v2 execData
	h.OK("POST", "/v2/commands", map[string]any{"command": "true"}, &v2)
	if v2.Stdout == nil || *v2.Stdout != "" {
		t.Fatalf("v2 empty stdout: %+v", v2)
	}
}

func TestTimeoutThenWait(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	start := time.Now()
	d := h.run(map[string]any{"command": "echo early; sleep 1; echo late", "timeout": 0.3})
	if el := time.Since(start); el > 900*time.Millisecond {
		t.Fatalf("timeout took %v", el)
	}
	if d.Status != StatusRunning || d.ExitCode != nil || str(d.Stdout) != "early\n" {
		t.Fatalf("%+v", d)
	}
	o := h.waitDone(d.CommandID)
	if o.Command.Status != StatusCompleted || code(o.Command.ExitCode) != "0" || o.Stdout != "early\nlate\n" || o.Offset != 11 {
		t.Fatalf("%+v %+v", o, o.Command)
	}
	// Reading from the returned offset gives only what came after.
	var rest outputData
	h.OK("GET", "/v2/commands/"+d.CommandID+"?offset=6", nil, &rest)
	if rest.Stdout != "late\n" || rest.StdoutGap || rest.SessionID != d.SessionID {
		t.Fatalf("%+v", rest)
	}
}

func TestAsyncReturnsAtOnce(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	start := time.Now()
	d := h.run(map[string]any{"command": "sleep 0.5; echo done", "mode": "async"})
	if time.Since(start) > 400*time.Millisecond || d.Status != StatusRunning || d.CommandID == "" || d.ExitCode != nil {
		t.Fatalf("%+v after %v", d, time.Since(start))
	}
	if o := h.waitDone(d.CommandID); o.Stdout != "done\n" || code(o.Command.ExitCode) != "0" {
		t.Fatalf("%+v", o)
	}
	h.Fails(422, "POST", "/v2/commands", map[string]any{"command": "true", "mode": "later"})
}

func TestGetWaitReturnsOnNewOutput(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	d := h.run(map[string]any{"command": "echo a; read x; echo $x", "mode": "async"})
	var o outputData
	h.OK("GET", "/v2/commands/"+d.CommandID+"?wait=true&wait_timeout=5", nil, &o)
	if o.Stdout != "a\n" || o.Command.Status != StatusRunning {
		t.Fatalf("%+v", o)
	}
	start := time.Now()
	h.OK("GET", "/v2/commands/"+d.CommandID+"?wait=true&wait_timeout=0.2&offset=2", nil, &o)
	if o.Stdout != "" || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("wait did not honour wait_timeout: %+v", o)
	}
	h.OK("POST", "/v2/commands/"+d.CommandID+"/stdin", map[string]any{"input": "b\n"}, nil)
	if o = h.waitDone(d.CommandID); o.Stdout != "a\nb\n" {
		t.Fatalf("%+v", o)
	}
	h.Fails(422, "GET", "/v2/commands/"+d.CommandID+"?offset=abc", nil)
}

func TestHardTimeoutKillsTree(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	start := time.Now()
	d := h.run(map[string]any{"command": "sleep 100 & sleep 100", "hard_timeout": 0.3})
	if d.Status != StatusTimedOut || code(d.ExitCode) != "-1" || time.Since(start) > 5*time.Second {
		t.Fatalf("%+v", d)
	}
	c, err := h.p.e.Command(d.CommandID)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the process group to end", func() bool { return !groupAlive(c.pgid) })
}

func TestKillEachSignal(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	for _, sig := range []string{"SIGTERM", "SIGKILL", "SIGINT", ""} {
		d := h.run(map[string]any{"command": "sleep 30", "mode": "async"})
		body := map[string]any{}
		if sig != "" {
			body["signal"] = sig
		}
		h.OK("POST", "/v2/commands/"+d.CommandID+"/kill", body, nil)
		o := h.waitDone(d.CommandID)
		if o.Command.Status != StatusCompleted || code(o.Command.ExitCode) != "-1" {
			t.Fatalf("%s: %+v", sig, o.Command)
		}
		h.Fails(400, "POST", "/v2/commands/"+d.CommandID+"/kill", body)
	}
	d := h.run(map[string]any{"command": "sleep 30", "mode": "async"})
	h.Fails(400, "POST", "/v2/commands/"+d.CommandID+"/kill", map[string]any{"signal": "SIGHUP"})
	h.OK("POST", "/v2/commands/"+d.CommandID+"/kill", map[string]any{"signal": "SIGKILL"}, nil)
}

func TestStdin(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	d := h.run(map[string]any{"command": "cat", "mode": "async"})
	h.OK("POST", "/v2/commands/"+d.CommandID+"/stdin", map[string]any{"input": "hello\n"}, nil)
	var o outputData
	h.OK("GET", "/v2/commands/"+d.CommandID+"?wait=true&wait_timeout=5", nil, &o)
	if o.Stdout != "hello\n" || o.Command.Status != StatusRunning {
		t.Fatalf("%+v", o)
	}
	h.OK("POST", "/v2/commands/"+d.CommandID+"/kill", nil, nil)
	h.waitDone(d.CommandID)
	h.Fails(400, "POST", "/v2/commands/"+d.CommandID+"/stdin", map[string]any{"input": "x"})
	h.Fails(422, "POST", "/v2/commands/"+d.CommandID+"/stdin", map[string]any{})
}

func TestUnknownIDs(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.Fails(404, "GET", "/v2/commands/nope", nil)
	h.Fails(404, "POST", "/v2/commands/nope/stdin", map[string]any{"input": "x"})
	h.Fails(404, "POST", "/v2/commands/nope/kill", nil)
	h.Fails(404, "DELETE", "/v2/commands/sessions/nope", nil)
	h.Fails(404, "POST", "/v2/commands", map[string]any{"command": "true", "session": "nope"})
}

func TestShellsAndArgs(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	d := h.run(map[string]any{"command": "printf", "args": []string{"%s-%s", "a b", "$HOME"}, "shell": "none"})
	if str(d.Stdout) != "a b-$HOME" || code(d.ExitCode) != "0" {
		t.Fatalf("%+v", d)
	}
	if d = h.run(map[string]any{"command": "echo $0", "shell": "sh"}); !strings.HasSuffix(str(d.Stdout), "sh\n") {
		t.Fatalf("%+v", d)
	}
	if d = h.run(map[string]any{"command": "echo ${BASH_VERSION:+bash}", "shell": "bash"}); str(d.Stdout) != "bash\n" {
		t.Fatalf("%+v", d)
	}
	h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "echo", "args": []string{"x"}})
	h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "echo", "args": []string{}, "shell": "bash"})
	for _, sh := range []string{"powershell", "cmd"} {
		if msg := h.Fails(503, "POST", "/v2/commands", map[string]any{"command": "x", "shell": sh}); !strings.Contains(msg, sh) {
			t.Fatalf("%s: %q", sh, msg)
		}
	}
	h.Fails(422, "POST", "/v2/commands", map[string]any{"command": "x", "shell": "zsh"})
	h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "/no/such/program", "shell": "none"})
}

func TestMaxOutputLength(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	d := h.run(map[string]any{"command": "printf 'a%.0s' $(seq 100); printf 'b%.0s' $(seq 60) >&2", "max_output_length": 10})
	want := "aaaaa" + truncMarker + "aaaaa"
	if str(d.Stdout) != want || str(d.Stderr) != "bbbbb"+truncMarker+"bbbbb" || str(d.Output) != want+str(d.Stderr) || d.Offset != 100 || d.StderrOffset != 60 {
		t.Fatalf("%+v", d)
	}
	if d = h.run(map[string]any{"command": "printf 'a%.0s' $(seq 100)", "max_output_length": 0}); len(str(d.Stdout)) != 100 {
		t.Fatalf("unlimited: %+v", d)
	}
	// A later read returns the stream whole.
	var o outputData
	h.OK("GET", "/v2/commands/"+d.CommandID, nil, &o)
	if len(o.Stdout) != 100 {
		t.Fatalf("%+v", o)
	}
}

func TestRetentionGap(t *testing.T) {
	h := newHarness(t, Config{}, func(e *Engine) { e.retainMax, e.retainTrim = 1000, 500 })
	d := h.run(map[string]any{"command": "head -c 3000 /dev/zero | tr '\\0' a; echo -n e >&2"})
	if d.Offset != 3000 || len(str(d.Stdout)) > 1000 || len(str(d.Stdout)) < 500 {
		t.Fatalf("%d %d", d.Offset, len(str(d.Stdout)))
	}
	var o outputData
	h.OK("GET", "/v2/commands/"+d.CommandID+"?offset=10", nil, &o)
	if !o.StdoutGap || o.StdoutStartOffset <= 10 || o.StdoutStartOffset+int64(len(o.Stdout)) != 3000 || o.Offset != 3000 ||
		o.StderrGap || o.Stderr != "e" || o.StderrStartOffset != 0 {
		t.Fatalf("%+v", o)
	}
	h.OK("GET", "/v2/commands/"+d.CommandID+"?offset=2999&stderr_offset=1", nil, &o)
	if o.StdoutGap || o.Stdout != "a" || o.Stderr != "" {
		t.Fatalf("%+v", o)
	}
}

func TestCommandsPerSessionDropped(t *testing.T) {
	h := newHarness(t, Config{}, func(e *Engine) { e.maxCommands = 2 })
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "s"}, nil)
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, h.run(map[string]any{"command": "true", "session": "s"}).CommandID)
	}
	h.Fails(404, "GET", "/v2/commands/"+ids[0], nil)
	h.OK("GET", "/v2/commands/"+ids[2], nil, nil)
}

func TestStreamFrames(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	frames := h.stream(map[string]any{"command": "echo one; echo two >&2; exit 3"}, nil)
	if len(frames) != 4 || frames[0]["type"] != "started" || frames[3]["type"] != "exit" {
		t.Fatalf("%v", frames)
	}
	for i, f := range frames {
		if f["seq"] != float64(i+1) {
			t.Fatalf("frame %d seq %v", i, f["seq"])
		}
	}
	if frames[0]["session_id"] == "" || frames[0]["command_id"] == "" {
		t.Fatalf("%v", frames[0])
	}
	got := map[string]map[string]any{}
	for _, f := range frames[1:3] {
		got[f["stream"].(string)] = f
	}
	if got["stdout"]["data"] != "b25lCg==" || got["stdout"]["offset"] != 0.0 || got["stderr"]["data"] != "dHdvCg==" || got["stderr"]["type"] != "output" {
		t.Fatalf("%v", frames)
	}
	exit := frames[3]
	if exit["status"] != "completed" || exit["exit_code"] != 3.0 || exit["stdout_offset"] != 4.0 || exit["stderr_offset"] != 4.0 {
		t.Fatalf("%v", exit)
	}
	// v1 streams the same way.
	if frames = h.stream(map[string]any{"command": "exit 0", "_path": "/v1/bash/exec"}, nil); frames[len(frames)-1]["exit_code"] != 0.0 {
		t.Fatalf("%v", frames)
	}
}

func TestStreamPingAndGap(t *testing.T) {
	h := newHarness(t, Config{}, func(e *Engine) { e.pingEvery = 50 * time.Millisecond; e.retainMax, e.retainTrim = 100, 50 })
	frames := h.stream(map[string]any{"command": "sleep 0.2; head -c 1000 /dev/zero"}, nil)
	types := map[string]bool{}
	for _, f := range frames {
		types[f["type"].(string)] = true
	}
	if !types["ping"] || frames[len(frames)-1]["stdout_offset"] != 1000.0 {
		t.Fatalf("%v", frames)
	}
}

func TestStreamDisconnectKillsSync(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	var started map[string]any
	h.stream(map[string]any{"command": "sleep 30"}, func(f map[string]any) bool { started = f; return false })
	if o := h.waitDone(started["command_id"].(string)); o.Command.Status != StatusCompleted || code(o.Command.ExitCode) != "-1" {
		t.Fatalf("%+v", o.Command)
	}
	// An async command outlives its stream: a later sync stream's
	// disconnect has been acted on, and the async command still runs.
	h.stream(map[string]any{"command": "sleep 30", "mode": "async"}, func(f map[string]any) bool { started = f; return false })
	h.disconnectedAfter()
	var o outputData
	h.OK("GET", "/v2/commands/"+started["command_id"].(string), nil, &o)
	if o.Command.Status != StatusRunning {
		t.Fatalf("%+v", o.Command)
	}
}

func TestStreamErrorsBeforeStartAreJSON(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	req, _ := http.NewRequest("POST", h.srv.URL+"/v2/commands", strings.NewReader(`{"command":"x","shell":"powershell"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
