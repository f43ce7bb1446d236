package pty

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func TestWSJSON(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	id := h.session(map[string]any{"id": "w1"})
	c, resp, err := h.dial("/v2/pty/sessions/" + id + "/ws")
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := next(t, c, 5*time.Second)
	if err != nil || f.Type != "ready" || f.SessionID != id || f.Transport != "json" || f.Backend != "native" || f.Resumed {
		t.Fatalf("%+v %v", f, err)
	}
	send(t, c, map[string]any{"type": "input", "data": "echo ws$((40+2))\n"})
	until(t, c, "ws42", 5*time.Second)
	send(t, c, map[string]any{"type": "ping", "timestamp": 12345})
	for f.Type != "pong" {
		if f, err = next(t, c, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if string(f.Timestamp) != "12345" {
		t.Fatalf("%+v", f)
	}
	// Resize nested under data; any other frame is typed as it is.
	send(t, c, map[string]any{"type": "resize", "data": map[string]int{"cols": 101, "rows": 33}})
	// stty reads the terminal's size itself (tput may take COLUMNS from
	// an environment bash's readline updates on its own schedule).
	if err := c.WriteMessage(websocket.TextMessage, []byte("stty size\n")); err != nil {
		t.Fatal(err)
	}
	until(t, c, "33 101", 5*time.Second)
	// REST and the socket share the shell.
	h.exec(id, map[string]any{"command": "echo from-rest"})
	until(t, c, "from-rest", 5*time.Second)

	// A second socket without durable is refused after the upgrade.
	c2, resp, err := h.dial("/v2/pty/sessions/" + id + "/ws")
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatal(err)
	}
	if f, err = next(t, c2, 5*time.Second); err != nil || f.Type != "error" || f.Data != "Session already has an active WebSocket connection" {
		t.Fatalf("%+v %v", f, err)
	}
	ends(t, c2, websocket.ClosePolicyViolation, false, 5*time.Second)
	// Unknown id: 101, the error frame, then close.
	c3, resp, err := h.dial("/v2/pty/sessions/nope/ws")
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatal(err)
	}
	if f, err = next(t, c3, 5*time.Second); err != nil || f.Type != "error" || f.Data != "Session not found" {
		t.Fatalf("%+v %v", f, err)
	}
	ends(t, c3, websocket.ClosePolicyViolation, false, 5*time.Second)
	// Bad query answers before the upgrade.
	if _, resp, _ = h.dial("/v2/pty/sessions/" + id + "/ws?restore=true"); resp == nil || resp.StatusCode != 400 {
		t.Fatalf("%+v", resp)
	}
	// The session closing ends the socket with an error frame, then a
	// normal close.
	h.OK("DELETE", "/v2/pty/sessions/"+id, nil, nil)
	for {
		if f, err = next(t, c, 5*time.Second); err != nil {
			t.Fatalf("no error frame before close: %v", err)
		}
		if f.Type == "error" {
			break
		}
	}
	if f.Data != "Session closed" {
		t.Fatalf("%+v", f)
	}
	ends(t, c, websocket.CloseNormalClosure, false, 5*time.Second)
}

func TestWSBinary(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	id := h.session(nil)
	c, _, err := h.dial("/v2/pty/sessions/" + id + "/ws?protocol=binary")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if f, _ := next(t, c, 5*time.Second); f.Type != "ready" || f.Transport != "binary" {
		t.Fatalf("%+v", f)
	}
	if err := c.WriteMessage(websocket.BinaryMessage, []byte("echo bin$((1+1))\r")); err != nil {
		t.Fatal(err)
	}
	for _, f := range until(t, c, "bin2", 5*time.Second) {
		if f.Type != "binary" {
			t.Fatalf("non-binary output frame %+v", f)
		}
	}
}

func TestWSDurable(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	id := h.session(map[string]any{"id": "d1"})
	path := "/v2/pty/sessions/" + id + "/ws?durable=true"
	c1, _, err := h.dial(path)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := next(t, c1, 5*time.Second); f.Resumed {
		t.Fatalf("%+v", f)
	}
	send(t, c1, map[string]any{"type": "input", "data": "echo first-$((6*7))\n"})
	until(t, c1, "first-42", 5*time.Second)
	// A durable takeover: the older socket gets relay_replaced and closes.
	c2, _, err := h.dial(path)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := next(t, c2, 5*time.Second); f.Type != "ready" || !f.Resumed {
		t.Fatalf("%+v", f)
	}
	for {
		f, err := next(t, c1, 5*time.Second)
		if err != nil {
			t.Fatal("no relay_replaced")
		}
		if f.Type == "relay_replaced" {
			break
		}
	}
	ends(t, c1, websocket.CloseNormalClosure, false, 5*time.Second)
	// Output while nothing is attached; restore replays the buffer.
	c2.Close()
	detached(t, h, id)
	h.exec(id, map[string]any{"command": "echo while-away"})
	c3, _, err := h.dial(path + "&restore=true&replay_bytes=1")
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	f, _ := next(t, c3, 5*time.Second)
	if f.Type != "ready" || !f.Resumed {
		t.Fatalf("%+v", f)
	}
	if f, _ = next(t, c3, 5*time.Second); f.Type != "restore_output" || !strings.Contains(f.Data, "first-42") || !strings.Contains(f.Data, "while-away") {
		t.Fatalf("%+v", f)
	}
	if f, _ = next(t, c3, 5*time.Second); f.Type != "terminal_restored" || f.SessionID != id {
		t.Fatalf("%+v", f)
	}
	send(t, c3, map[string]any{"type": "input", "data": "echo live\n"})
	until(t, c3, "live", 5*time.Second)
	// A durable reattach without restore gets only what it missed.
	c3.Close()
	detached(t, h, id)
	h.exec(id, map[string]any{"command": "echo gap-only"})
	c4, _, err := h.dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if f, _ = next(t, c4, 5*time.Second); f.Type != "ready" || !f.Resumed {
		t.Fatalf("%+v", f)
	}
	if f, _ = next(t, c4, 5*time.Second); f.Type != "relay_resumed" {
		t.Fatalf("%+v", f)
	}
	got := until(t, c4, "gap-only", 5*time.Second)
	for _, f := range got {
		if strings.Contains(f.Data, "first-42") {
			t.Fatalf("replayed output from before the gap: %q", f.Data)
		}
	}
}

func TestWSAnonymous(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	for _, q := range []string{"?durable=true", "?restore=true"} {
		if _, resp, _ := h.dial("/v2/pty/ws" + q); resp == nil || resp.StatusCode != 400 {
			t.Fatalf("%s: %+v", q, resp)
		}
	}
	c, _, err := h.dial("/v2/pty/ws")
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := next(t, c, 5*time.Second); f.Type != "ready" || f.SessionID == "" {
		t.Fatalf("%+v", f)
	}
	send(t, c, map[string]any{"type": "input", "data": "sleep 100.125 &\n"})
	running(t, "sleep 100.125", 1)
	var list listResult
	h.OK("GET", "/v2/pty/sessions", nil, &list)
	if len(list.Sessions) != 0 {
		t.Fatalf("throwaway shell listed: %+v", list)
	}
	c.Close()
	gone(t, "sleep 100.125")

	// v1: without session_id a session_id frame comes before ready, and
	// the session outlives the socket.
	c, _, err = h.dial("/v1/shell/ws")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := next(t, c, 5*time.Second)
	if f.Type != "session_id" || f.Data == "" {
		t.Fatalf("%+v", f)
	}
	sid := f.Data
	if f, _ = next(t, c, 5*time.Second); f.Type != "ready" || f.SessionID != sid {
		t.Fatalf("%+v", f)
	}
	c.Close()
	var r Result
	h.OK("POST", "/v1/shell/view", map[string]any{"id": sid}, &r)
	detached(t, h, sid)
	c, _, err = h.dial("/v1/shell/ws?session_id=" + sid)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if f, _ = next(t, c, 5*time.Second); f.Type != "ready" || f.SessionID != sid {
		t.Fatalf("%+v", f)
	}
}

// TestWSSlowSocket: a socket that stops reading is dropped; the shell and
// REST go on.
func TestWSSlowSocket(t *testing.T) {
	h := newHarness(t, Config{}, func(e *Engine) { e.wsQueue = 4 })
	id := h.session(nil)
	c, _, err := h.dial("/v2/pty/sessions/" + id + "/ws?protocol=binary")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := h.exec(id, map[string]any{"command": "head -c 30000000 /dev/zero | tr '\\0' x; echo done"})
	if r.Status != StatusCompleted || !strings.HasSuffix(r.Output, "done") {
		t.Fatalf("%s %d", r.Status, len(r.Output))
	}
	// Dropped: the connection ends without a close frame, after
	// whatever output was queued (a read timeout is not an end).
	ends(t, c, websocket.CloseAbnormalClosure, true, 10*time.Second)
}

// detached waits until the server has noticed a closed socket.
func detached(t *testing.T, h *harness, id string) {
	t.Helper()
	s, err := h.p.e.lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "socket not detached", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.sock == nil })
}
