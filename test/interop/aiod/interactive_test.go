package aiod

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// tinyPNG is a 1x1 PNG.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// requireKernel fails (or skips without A2C_REQUIRE_PEERS) when Debian's
// python3-ipykernel is missing.
func requireKernel(t *testing.T) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import ipykernel").Run(); err != nil {
		harness.MissingPeer(t, "Debian python3-ipykernel")
	}
	if _, err := exec.LookPath("node"); err != nil {
		harness.MissingPeer(t, "node")
	}
}

// TestAiodCode drives the code plane on the real binary: python cells on
// a real ipykernel and javascript cells on node (requirements 24-30).
func TestAiodCode(t *testing.T) {
	requireKernel(t)
	d := startAiod(t, nil, "--workspace", t.TempDir())
	a := &aio{t: t, base: d.URL}
	run := func(lang, session, code string, extra ...any) (int, envelope, map[string]any) {
		t.Helper()
		body := map[string]any{"language": lang, "code": code}
		if session != "" {
			body["session_id"] = session
		}
		for i := 0; i+1 < len(extra); i += 2 {
			body[extra[i].(string)] = extra[i+1]
		}
		code2, e := a.call("POST", "/v2/code/execute", "/v2/code/execute", body)
		return code2, e, e.obj()
	}
	outputs := func(m map[string]any) []map[string]any {
		var out []map[string]any
		for _, o := range m["outputs"].([]any) {
			out = append(out, o.(map[string]any))
		}
		return out
	}

	t.Run("python keeps state across cells", func(t *testing.T) {
		code, e, m := run("python", "py1", "x = 41")
		if code != 200 || !e.Success || m["status"] != "ok" || m["exit_code"] != 0.0 || m["session_id"] != "py1" {
			t.Fatalf("%d %s", code, e.raw)
		}
		_, e, m = run("python3", "py1", "print(x + 1)\nx + 2")
		outs := outputs(m)
		if m["stdout"] != "42\n" || len(outs) != 2 || outs[0]["output_type"] != "stream" || outs[1]["output_type"] != "execute_result" ||
			outs[1]["data"].(map[string]any)["text/plain"] != "43" {
			t.Errorf("%s", e.raw)
		}
	})

	t.Run("an error cell and a cell that prints then raises", func(t *testing.T) {
		code, e, m := run("python", "py1", "1/0")
		outs := outputs(m)
		if code != 200 || e.Success || m["status"] != "error" || m["exit_code"] != 1.0 || len(outs) != 1 ||
			outs[0]["output_type"] != "error" || outs[0]["ename"] != "ZeroDivisionError" || outs[0]["evalue"] == nil || outs[0]["traceback"] == nil {
			t.Errorf("1/0: %d %s", code, e.raw)
		}
		_, e, m = run("python", "py1", "print('before')\nraise ValueError('boom')")
		outs = outputs(m)
		if len(outs) != 2 || outs[0]["output_type"] != "stream" || outs[0]["text"] != "before\n" || outs[1]["ename"] != "ValueError" || outs[1]["evalue"] != "boom" {
			t.Errorf("print then raise: %s", e.raw)
		}
	})

	t.Run("rich output", func(t *testing.T) {
		_, e, m := run("python", "py1", fmt.Sprintf("import base64\nfrom IPython.display import Image, HTML, display\ndisplay(HTML('<b>bold</b>'))\ndisplay(Image(data=base64.b64decode(%q)))", tinyPNG))
		var html, png bool
		for _, o := range outputs(m) {
			data, _ := o["data"].(map[string]any)
			html = html || (o["output_type"] == "display_data" && data["text/html"] == "<b>bold</b>")
			if s, ok := data["image/png"].(string); ok && o["output_type"] == "display_data" {
				b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
				png = png || (err == nil && len(b) > 8 && string(b[1:4]) == "PNG")
			}
		}
		if !html || !png {
			t.Errorf("html %v png %v: %s", html, png, e.raw)
		}
	})

	t.Run("a timeout interrupts the kernel; the session still works", func(t *testing.T) {
		start := time.Now()
		_, e, m := run("python", "py1", "while True: pass", "timeout", 2)
		if took := time.Since(start); m["status"] != "timeout" || e.Success || m["exit_code"] != 1.0 || took > 10*time.Second {
			t.Errorf("after %s: %s", took, e.raw)
		}
		_, e, m = run("python", "py1", "print(x)")
		if m["status"] != "ok" || m["stdout"] != "41\n" {
			t.Errorf("after the interrupt: %s", e.raw)
		}
	})

	t.Run("javascript keeps state across cells", func(t *testing.T) {
		_, e, m := run("javascript", "js1", "let n = 20; console.log('set')")
		if m["status"] != "ok" || m["stdout"] != "set\n" {
			t.Fatalf("%s", e.raw)
		}
		_, e, m = run("node", "js1", "n * 2 + 2")
		found := false
		for _, o := range outputs(m) {
			if data, ok := o["data"].(map[string]any); ok && data["text/plain"] == "42" {
				found = true
			}
		}
		if !found || m["status"] != "ok" {
			t.Errorf("%s", e.raw)
		}
		_, e, m = run("js", "js1", "null.x")
		if m["status"] != "error" || e.Success || outputs(m)[0]["ename"] != "TypeError" {
			t.Errorf("js error: %s", e.raw)
		}
	})

	t.Run("validation and sessions", func(t *testing.T) {
		code, e, _ := run("ruby", "", "puts 1")
		if code != 422 || e.Message != "Unsupported language 'ruby'. Supported: python, javascript" {
			t.Errorf("ruby: %d %s", code, e.raw)
		}
		if code, e, _ := run("python", "", ""); code != 422 {
			t.Errorf("empty code: %d %s", code, e.raw)
		}
		if code, e, _ := run("python", "", "1", "timeout", 901); code != 422 {
			t.Errorf("timeout 901: %d %s", code, e.raw)
		}
		if code, e := a.call("GET", "/v2/code/sessions/{session_id}", "/v2/code/sessions/nope", nil); code != 404 {
			t.Errorf("unknown session: %d %s", code, e.raw)
		}
		code, e = a.call("DELETE", "/v2/code/sessions/{session_id}", "/v2/code/sessions/nope", nil)
		if code != 200 || !strings.Contains(string(e.Data), `"deleted":false`) {
			t.Errorf("delete unknown: %d %s", code, e.raw)
		}
		if code, e := a.call("GET", "/v2/code/info", "/v2/code/info", nil); code != 200 || !e.Success {
			t.Errorf("info: %d %s", code, e.raw)
		}
		if code, e := a.call("GET", "/v2/code/sessions", "/v2/code/sessions", nil); code != 200 || !strings.Contains(string(e.Data), "py1") {
			t.Errorf("sessions: %d %s", code, e.raw)
		}
		_, e, m := run("python", "", "print('one-off')")
		if m["status"] != "ok" || m["stdout"] != "one-off\n" {
			t.Errorf("one-off: %s", e.raw)
		}
	})

	t.Run("kernel session cap", func(t *testing.T) {
		var last envelope
		code := 0
		for i := 0; i < 6 && code != 429; i++ {
			code, last, _ = run("python", fmt.Sprintf("cap%d", i), "1")
		}
		if code != 429 || last.Message != "Maximum number of kernel sessions (5) reached" {
			t.Errorf("6th kernel session: %d %s", code, last.raw)
		}
		if _, _, m := run("python", "py1", "print(x)"); m["stdout"] != "41\n" {
			t.Error("an existing session was evicted")
		}
	})
}

// TestAiodCodeWithoutInterpreters: no python and no node → 503 naming
// what was looked for, with a hint.
func TestAiodCodeWithoutInterpreters(t *testing.T) {
	d := startAiod(t, []string{"AIO_PYTHON_BIN=/nonexistent/python3", "AIO_NODE_BIN=/nonexistent/node"}, "--workspace", t.TempDir())
	a := &aio{t: t, base: d.URL}
	for _, lang := range []string{"python", "javascript"} {
		code, e := a.call("POST", "/v2/code/execute", "/v2/code/execute", map[string]any{"language": lang, "code": "1"})
		if code != 503 || e.Success || e.Hint == nil || !strings.Contains(e.Message, "/nonexistent/") {
			t.Errorf("%s: %d %s", lang, code, e.raw)
		}
	}
}

// wsURL turns the daemon's base URL and a path into a WebSocket URL.
func wsURL(base, path string) string { return "ws" + strings.TrimPrefix(base, "http") + path }

// frames reads JSON frames until pred says stop or the deadline passes.
func readUntil(t *testing.T, c *websocket.Conn, d time.Duration, pred func(f map[string]any) bool) []map[string]any {
	t.Helper()
	var got []map[string]any
	deadline := time.Now().Add(d)
	for {
		_ = c.SetReadDeadline(deadline)
		var f map[string]any
		if err := c.ReadJSON(&f); err != nil {
			t.Fatalf("after %d frames: %v (%v)", len(got), err, got)
		}
		got = append(got, f)
		if pred(f) {
			return got
		}
	}
}

// wsEnds reads the next message and checks that it is the end of the
// stream: a close frame with code want. Another frame, or a read timeout
// (d), is a failure: a socket that merely went quiet has not closed.
func wsEnds(t *testing.T, c *websocket.Conn, want int, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	mt, msg, err := c.ReadMessage()
	var ce *websocket.CloseError
	switch {
	case err == nil:
		t.Errorf("a frame (%d) %q where the socket should close with %d", mt, msg, want)
	case errors.As(err, &ce) && ce.Code == want:
	default:
		t.Errorf("the socket did not close with %d: %v", want, err)
	}
}

// waitUntil polls cond until it holds, failing after d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
	}
}

// TestAiodTerminal drives a PTY over a real WebSocket: echo, resize and
// tput cols, Ctrl-C, a durable reconnect with replay, and the failure
// shapes (unknown session, bad key).
func TestAiodTerminal(t *testing.T) {
	d := startAiod(t, []string{"AIO_API_KEY=ptykey"}, "--workspace", t.TempDir())
	a := &aio{t: t, base: d.URL, key: "ptykey"}
	hdr := http.Header{"Authorization": {"Bearer ptykey"}}
	code, e := a.call("POST", "/v2/pty/sessions", "/v2/pty/sessions", map[string]any{"id": "t1"})
	if code != 200 || e.obj()["session_id"] != "t1" {
		t.Fatalf("create: %d %s", code, e.raw)
	}
	c, resp, err := websocket.DefaultDialer.Dial(wsURL(d.URL, "/v2/pty/sessions/t1/ws?durable=true"), hdr)
	if err != nil {
		t.Fatalf("dial: %v %v", err, resp)
	}
	first := readUntil(t, c, 5*time.Second, func(map[string]any) bool { return true })[0]
	if first["type"] != "ready" || first["session_id"] != "t1" {
		t.Fatalf("first frame %v", first)
	}
	out := ""
	collect := func(want string) {
		t.Helper()
		readUntil(t, c, 10*time.Second, func(f map[string]any) bool {
			if f["type"] == "output" {
				out += fmt.Sprint(f["data"])
			}
			return strings.Contains(out, want)
		})
	}
	c.WriteJSON(map[string]any{"type": "input", "data": "echo hello-$((6*7))\n"})
	collect("hello-42")
	c.WriteJSON(map[string]any{"type": "resize", "cols": 97, "rows": 30})
	c.WriteJSON(map[string]any{"type": "input", "data": "tput cols\n"})
	collect("97")
	c.WriteJSON(map[string]any{"type": "input", "data": "sleep 88.4242\n"})
	waitUntil(t, 10*time.Second, "sleep is not running", func() bool { return len(processesWith("88.4242")) > 0 })
	c.WriteJSON(map[string]any{"type": "input", "data": "\u0003"})
	noneLeft(t, "88.4242")
	c.WriteJSON(map[string]any{"type": "ping", "timestamp": 12345})
	readUntil(t, c, 5*time.Second, func(f map[string]any) bool { return f["type"] == "pong" })
	c.WriteJSON(map[string]any{"type": "input", "data": "echo marker-before-reconnect\n"})
	collect("marker-before-reconnect\r\n")

	// A durable reconnect replaces the first socket and replays.
	c2, _, err := websocket.DefaultDialer.Dial(wsURL(d.URL, "/v2/pty/sessions/t1/ws?durable=true&restore=true"), hdr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	replay := ""
	readUntil(t, c2, 10*time.Second, func(f map[string]any) bool {
		if f["type"] == "restore_output" {
			replay += fmt.Sprint(f["data"])
		}
		return f["type"] == "terminal_restored"
	})
	if !strings.Contains(replay, "marker-before-reconnect") {
		t.Errorf("replay lacks the earlier output: %q", replay)
	}
	readUntil(t, c, 5*time.Second, func(f map[string]any) bool { return f["type"] == "relay_replaced" })
	wsEnds(t, c, websocket.CloseNormalClosure, 5*time.Second)
	c.Close()

	// Unknown session: 101, then the error frame, then close.
	c3, resp, err := websocket.DefaultDialer.Dial(wsURL(d.URL, "/v2/pty/sessions/nope/ws"), hdr)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("unknown session: %v %v", err, resp)
	}
	_ = c3.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, msg, err := c3.ReadMessage()
	if err != nil || string(msg) != `{"type":"error","data":"Session not found"}` {
		t.Errorf("unknown session frame: %q %v", msg, err)
	}
	wsEnds(t, c3, websocket.ClosePolicyViolation, 5*time.Second)
	c3.Close()

	// Bad key: 401 before any upgrade.
	_, resp, err = websocket.DefaultDialer.Dial(wsURL(d.URL, "/v2/pty/sessions/t1/ws"), http.Header{"Authorization": {"Bearer wrong"}})
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("bad key: %v %v", err, resp)
	}

	// REST exec on the same session.
	code, e = a.call("POST", "/v2/pty/sessions/{id}/exec", "/v2/pty/sessions/t1/exec", map[string]any{"command": "echo rest-$((1+1))"})
	if m := e.obj(); code != 200 || m["status"] != "completed" || m["exit_code"] != 0.0 || !strings.Contains(fmt.Sprint(m["output"]), "rest-2") {
		t.Errorf("exec: %d %s", code, e.raw)
	}
	if code, e := a.call("POST", "/v2/pty/sessions/{id}/signal", "/v2/pty/sessions/t1/signal", nil); code != 200 {
		t.Errorf("signal: %d %s", code, e.raw)
	}
	if code, _ := a.call("POST", "/v2/pty/sessions/{id}/signal", "/v2/pty/sessions/t1/signal", nil); code != 404 {
		t.Errorf("second signal: %d", code)
	}
	if code, e := a.call("DELETE", "/v2/pty/sessions/{id}", "/v2/pty/sessions/t1", nil); code != 200 || e.Success {
		t.Errorf("delete of a gone session: %d %s", code, e.raw)
	}
}

// TestAiodWatch watches a directory: create, write, rename, delete of
// files and directories, each once and in order, over poll and over SSE;
// 404 before any stream byte.
func TestAiodWatch(t *testing.T) {
	ws := t.TempDir()
	d := startAiod(t, nil, "--workspace", ws)
	a := &aio{t: t, base: d.URL}
	dir := filepath.Join(ws, "w")
	os.MkdirAll(dir, 0o755)
	code, e := a.call("POST", "/v2/watch", "/v2/watch", map[string]any{"path": dir, "recursive": true, "debounce": 50})
	m := e.obj()
	if code != 200 || m["watcher_id"] == nil || m["reused"] != false {
		t.Fatalf("create: %d %s", code, e.raw)
	}
	id := m["watcher_id"].(string)

	// SSE reader in the background: it sends each frame, then how the
	// stream ended (nil: at its end, EOF), and stops when the test does.
	req, _ := http.NewRequest("GET", d.URL+"/v2/watch/"+id+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: %v %v", err, resp)
	}
	type sseFrame struct{ event, id, data string }
	sse, sseEnd, quit := make(chan sseFrame), make(chan error, 1), make(chan struct{})
	reader := make(chan struct{})
	go func() {
		defer close(reader)
		sc := bufio.NewScanner(resp.Body)
		var f sseFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event:"):
				f.event = strings.TrimSpace(line[6:])
			case strings.HasPrefix(line, "id:"):
				f.id = strings.TrimSpace(line[3:])
			case strings.HasPrefix(line, "data:"):
				f.data = strings.TrimSpace(line[5:])
			case line == "" && f.event != "":
				select {
				case sse <- f:
				case <-quit:
					return
				}
				f = sseFrame{}
			}
		}
		sseEnd <- sc.Err()
	}()
	defer func() { close(quit); resp.Body.Close(); <-reader }()

	type ev struct {
		Seq          int    `json:"seq"`
		Type         string `json:"type"`
		RelativePath string `json:"relative_path"`
		OldPath      string `json:"old_path"`
		IsDir        bool   `json:"is_dir"`
	}
	var streamed []sseFrame
	// nextFrame reads one frame, within its own deadline; the stream
	// ending or going quiet is a failure.
	nextFrame := func(what string) sseFrame {
		t.Helper()
		select {
		case f := <-sse:
			streamed = append(streamed, f)
			return f
		case err := <-sseEnd:
			t.Fatalf("stream ended (%v) while waiting for %s; frames %v", err, what, streamed)
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s within 10 s; frames %v", what, streamed)
		}
		return sseFrame{}
	}
	if f := nextFrame("watch_started"); f.event != "watch_started" {
		t.Fatalf("first frame %+v", f)
	}
	// Each step waits for its last event on the stream before the next:
	// a write is one event once the debounce has passed, and a new
	// directory is watched before its create is reported.
	step := func(do func() error, want string) {
		t.Helper()
		if err := do(); err != nil {
			t.Fatal(err)
		}
		for {
			f := nextFrame(want)
			var x ev
			if f.event == "file_change" && json.Unmarshal([]byte(f.data), &x) == nil && x.Type+" "+x.RelativePath == want {
				return
			}
		}
	}
	step(func() error { return os.WriteFile(filepath.Join(dir, "a.txt"), []byte("1"), 0o644) }, "write a.txt")
	step(func() error { return os.WriteFile(filepath.Join(dir, "a.txt"), []byte("22"), 0o644) }, "write a.txt")
	step(func() error { return os.Rename(filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")) }, "rename b.txt")
	step(func() error { return os.Mkdir(filepath.Join(dir, "sub"), 0o755) }, "create sub")
	step(func() error { return os.WriteFile(filepath.Join(dir, "sub", "c.txt"), []byte("3"), 0o644) }, "write sub/c.txt")
	step(func() error { return os.Remove(filepath.Join(dir, "b.txt")) }, "remove b.txt")

	code, e = a.call("GET", "/v2/watch/{watcher_id}/poll", "/v2/watch/"+id+"/poll?cursor=0&timeout=2", nil)
	var polled struct {
		Events []ev `json:"events"`
	}
	if code != 200 {
		t.Fatalf("poll: %d %s", code, e.raw)
	}
	json.Unmarshal(e.Data, &polled)
	var got []string
	for i, x := range polled.Events {
		if x.Seq != i+1 {
			t.Errorf("seq %d at %d", x.Seq, i)
		}
		got = append(got, x.Type+" "+x.RelativePath)
	}
	want := []string{"create a.txt", "write a.txt", "write a.txt", "rename b.txt", "create sub", "create sub/c.txt", "write sub/c.txt", "remove b.txt"}
	joined := strings.Join(got, ", ")
	// Overwriting a file is one write (truncate and write coalesced by
	// the debounce) or, rarely, two; every other event exactly once, in
	// order.
	if strings.Replace(joined, "write a.txt, write a.txt, write a.txt", "write a.txt, write a.txt", 1) != strings.Join(want, ", ") {
		t.Errorf("poll: %d events %s", len(got), joined)
	}
	for _, x := range polled.Events {
		if x.Type == "rename" && !strings.HasSuffix(x.OldPath, "a.txt") {
			t.Errorf("rename without old_path: %+v", x)
		}
	}
	if streamed[1].id != id+":1" || streamed[1].event != "file_change" {
		t.Errorf("SSE frames: %v", streamed)
	}
	var overSSE []string
	for _, f := range streamed[1:] {
		var x ev
		if err := json.Unmarshal([]byte(f.data), &x); err != nil {
			t.Fatalf("SSE data %+v: %v", f, err)
		}
		overSSE = append(overSSE, x.Type+" "+x.RelativePath)
	}
	if strings.Join(overSSE, ", ") != joined {
		t.Errorf("SSE order differs from poll:\n sse  %v\n poll %s", overSSE, joined)
	}
	for _, u := range []string{"/v2/watch/nope/events", "/v2/watch/nope/poll"} {
		resp, body := a.raw("GET", u, nil, "Accept", "text/event-stream")
		if resp.StatusCode != 404 || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || !strings.Contains(string(body), `"success":false`) {
			t.Errorf("%s: %d %s %s", u, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	if code, e := a.call("DELETE", "/v2/watch/{watcher_id}", "/v2/watch/"+id, nil); code != 200 || !e.Success {
		t.Errorf("delete: %d %s", code, e.raw)
	}
	// Deleting the watcher ends the stream: watch_stopped, then the end
	// of the response (EOF), each within its own deadline.
	if f := nextFrame("watch_stopped"); f.event != "watch_stopped" {
		t.Errorf("after delete: %+v", f)
	}
	select {
	case err := <-sseEnd:
		if err != nil {
			t.Errorf("stream failed instead of ending: %v", err)
		}
	case f := <-sse:
		t.Errorf("a frame after watch_stopped: %+v", f)
	case <-time.After(10 * time.Second):
		t.Error("the stream did not end within 10 s of the delete")
	}
}

// TestAiodInteractiveSweep calls every route of the code, terminal and
// watch planes once (v1 twins included), checking each answer's envelope
// and, where the document has one, its schema.
func TestAiodInteractiveSweep(t *testing.T) {
	requireKernel(t)
	ws := t.TempDir()
	d := startAiod(t, nil, "--workspace", ws)
	a := &aio{t: t, base: d.URL}
	ok := func(method, tmpl, path string, body any) map[string]any {
		t.Helper()
		code, e := a.call(method, tmpl, path, body)
		if code != 200 || !e.Success {
			t.Errorf("%s %s: %d %s", method, path, code, e.raw)
		}
		return e.obj()
	}

	// Code, v2 and v1.
	ok("POST", "/v2/code/sessions", "/v2/code/sessions", map[string]any{"language": "javascript", "session_id": "sw"})
	ok("GET", "/v2/code/sessions/{session_id}", "/v2/code/sessions/sw", nil)
	ok("DELETE", "/v2/code/sessions/{session_id}", "/v2/code/sessions/sw", nil)
	ok("DELETE", "/v2/code/sessions", "/v2/code/sessions", nil)
	m := ok("POST", "/v1/code/execute", "/v1/code/execute", map[string]any{"language": "python", "code": "print(2)"})
	if m["stderr"] != nil || m["stdout"] != "2\n" {
		t.Errorf("v1 code: stderr must be null: %v", m)
	}
	if outs, _ := m["outputs"].([]any); len(outs) != 1 || len(outs[0].(map[string]any)) < 9 {
		t.Errorf("v1 outputs carry every key: %v", m["outputs"])
	}
	if code, e := a.call("POST", "/v1/code/execute", "/v1/code/execute", map[string]any{"language": "python", "code": ""}); code != 200 {
		t.Errorf("v1 empty code: %d %s", code, e.raw)
	}
	ok("GET", "/v1/code/info", "/v1/code/info", nil)
	ok("POST", "/v1/jupyter/sessions/create", "/v1/jupyter/sessions/create", map[string]any{"session_id": "j1"})
	ok("POST", "/v1/jupyter/execute", "/v1/jupyter/execute", map[string]any{"code": "y = 5\ny", "session_id": "j1"})
	ok("GET", "/v1/jupyter/info", "/v1/jupyter/info", nil)
	ok("GET", "/v1/jupyter/sessions", "/v1/jupyter/sessions", nil)
	ok("GET", "/v1/jupyter/sessions/{session_id}", "/v1/jupyter/sessions/j1", nil)
	for _, op := range []string{"interrupt", "restart"} {
		if code, e := a.call("POST", "/v1/jupyter/sessions/{session_id}/"+op, "/v1/jupyter/sessions/j1/"+op, nil); code != 501 || e.Success || !strings.Contains(e.Message, "is not supported") {
			t.Errorf("jupyter %s: %d %s", op, code, e.raw)
		}
	}
	ok("DELETE", "/v1/jupyter/sessions/{session_id}", "/v1/jupyter/sessions/j1", nil)
	ok("DELETE", "/v1/jupyter/sessions", "/v1/jupyter/sessions", nil)
	ok("POST", "/v1/nodejs/execute", "/v1/nodejs/execute", map[string]any{"code": "globalThis.z = 3", "session_id": "n1"})
	ok("GET", "/v1/nodejs/info", "/v1/nodejs/info", nil)
	ok("GET", "/v1/nodejs/sessions", "/v1/nodejs/sessions", nil)
	ok("POST", "/v1/nodejs/sessions", "/v1/nodejs/sessions", map[string]any{"session_id": "n2"})
	ok("GET", "/v1/nodejs/sessions/{session_id}", "/v1/nodejs/sessions/n1", nil)
	ok("DELETE", "/v1/nodejs/sessions/{session_id}", "/v1/nodejs/sessions/n1", nil)

	// Terminals, v2 and v1.
	ok("POST", "/v2/pty/sessions", "/v2/pty/sessions", map[string]any{"id": "sw", "cols": 100, "rows": 30})
	ok("GET", "/v2/pty/sessions", "/v2/pty/sessions", nil)
	ok("GET", "/v2/pty/sessions/{id}", "/v2/pty/sessions/sw", nil)
	if code, e := a.call("PATCH", "/v2/pty/sessions/{id}", "/v2/pty/sessions/sw", map[string]any{"cols": 90, "rows": 20}); code != 200 {
		t.Errorf("patch: %d %s", code, e.raw)
	}
	ok("POST", "/v2/pty/sessions/{id}/input", "/v2/pty/sessions/sw/input", map[string]any{"input": "echo typed\n"})
	var screen map[string]any
	waitUntil(t, 10*time.Second, fmt.Sprintf("screen without the typed line's output: %v", screen), func() bool {
		screen = ok("GET", "/v2/pty/sessions/{id}/screen", "/v2/pty/sessions/sw/screen", nil)
		return strings.Count(fmt.Sprint(screen["output"]), "typed") >= 2 // the echo, then echo's output
	})
	ok("DELETE", "/v2/pty/sessions/{id}", "/v2/pty/sessions/sw", nil)
	c, _, err := websocket.DefaultDialer.Dial(wsURL(d.URL, "/v2/pty/ws"), nil)
	if err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, 5*time.Second, func(f map[string]any) bool { return f["type"] == "ready" })
	c.Close()
	a.covered("GET", "/v2/pty/ws")
	a.covered("GET", "/v2/pty/sessions/{id}/ws") // TestAiodTerminal drives it
	c, _, err = websocket.DefaultDialer.Dial(wsURL(d.URL, "/v1/shell/ws"), nil)
	if err != nil {
		t.Fatal(err)
	}
	frames := readUntil(t, c, 5*time.Second, func(f map[string]any) bool { return f["type"] == "ready" })
	if frames[0]["type"] != "session_id" || frames[0]["data"] == nil {
		t.Errorf("v1 ws announces its session first: %v", frames)
	}
	c.Close()
	a.covered("GET", "/v1/shell/ws")
	ok("GET", "/v1/shell/terminal-url", "/v1/shell/terminal-url", nil)

	// Watchers, v2 and v1.
	dir := filepath.Join(ws, "sweep")
	os.MkdirAll(dir, 0o755)
	ok("GET", "/v2/watch", "/v2/watch", nil)
	m = ok("POST", "/v1/file/watch", "/v1/file/watch", map[string]any{"path": dir})
	id, _ := m["watcher_id"].(string)
	ok("GET", "/v1/file/watch", "/v1/file/watch", nil)
	os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o644)
	m = ok("POST", "/v1/file/watch/{watcher_id}/poll", "/v1/file/watch/"+id+"/poll", map[string]any{"cursor": 0, "timeout": 2})
	if evs, _ := m["events"].([]any); len(evs) == 0 {
		t.Errorf("v1 poll: %v", m)
	}
	for _, u := range []string{"/v1/file/watch/" + id + "/events", "/v2/watch/" + id + "/events"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", d.URL+u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			cancel()
			t.Fatalf("%s: %v %v", u, err, resp)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		resp.Body.Close()
		cancel()
		if err != nil || !strings.HasPrefix(line, "event: watch_started") && !strings.HasPrefix(line, "id:") && !strings.HasPrefix(line, ":") {
			t.Errorf("%s first line %q: %v", u, line, err)
		}
	}
	a.covered("GET", "/v1/file/watch/{watcher_id}/events")
	a.covered("GET", "/v2/watch/{watcher_id}/events")
	start := time.Now()
	code, e := a.call("POST", "/v1/file/watch/wait", "/v1/file/watch/wait", map[string]any{"path": filepath.Join(dir, "never"), "timeout": 1})
	if code != 503 || e.Message != "timed out waiting for file event" || time.Since(start) > 5*time.Second {
		t.Errorf("wait timeout: %d %s", code, e.raw)
	}
	// Nothing says when the wait has taken hold, so the file is written
	// until the wait answers (each write is an event it may take).
	answered := make(chan struct{})
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			os.WriteFile(filepath.Join(dir, "soon"), []byte("s"), 0o644)
			select {
			case <-answered:
				return
			case <-tick.C:
			}
		}
	}()
	m = ok("POST", "/v1/file/watch/wait", "/v1/file/watch/wait", map[string]any{"path": filepath.Join(dir, "soon"), "timeout": 10})
	close(answered)
	<-writer
	if m["event"] == nil {
		t.Errorf("wait: %v", m)
	}
	ok("DELETE", "/v1/file/watch/{watcher_id}", "/v1/file/watch/"+id, nil)
}
