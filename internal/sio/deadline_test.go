package sio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestClientWritesOutliveDialDeadline: the deadline of the context Dial
// was given bounds the handshake and the upgrade probe only. A message
// written after it has passed must still go out: the client's frame
// writer writes on the net.Conn itself, so it must set that connection's
// write deadline on every write, not leave the probe's in force.
func TestClientWritesOutliveDialDeadline(t *testing.T) {
	for _, mode := range modes {
		for _, tr := range []struct {
			name string
			t    Transport
		}{{"polling-first", PollingFirst}, {"websocket-only", WebSocketOnly}} {
			t.Run(mode.name+"/"+tr.name, func(t *testing.T) {
				srv := NewServer(mode.opts)
				srv.Handle("/smcp", &echoHandler{})
				ts := httptest.NewServer(srv)
				defer ts.Close()
				defer srv.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				s, err := Dial(ctx, ts.URL, ClientOptions{Namespace: "/smcp", Transport: tr.t, Handler: clientHandler{}, Auth: map[string]string{"token": "ok"}})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Disconnect()
				request(t, s, "echo", Message{Args: []json.RawMessage{json.RawMessage(`1`)}})
				<-ctx.Done()
				time.Sleep(100 * time.Millisecond)
				request(t, s, "echo", Message{Args: []json.RawMessage{json.RawMessage(`2`)}})
			})
		}
	}
}

// TestClientWritesAfterServerPing: a server that sends a WebSocket ping
// (uvicorn's websockets does, every 20 s) makes gorilla answer with a pong
// under a one-second deadline on the net.Conn; a message the client sends
// later must still go out.
func TestClientWritesAfterServerPing(t *testing.T) {
	got := make(chan string, 4)
	ts := fakeEngine(t, func(ws *websocket.Conn) {
		_ = ws.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second))
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			got <- string(msg)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Dial(ctx, ts.URL, ClientOptions{Namespace: "/smcp", Transport: WebSocketOnly, Handler: clientHandler{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Disconnect()
	time.Sleep(1500 * time.Millisecond) // past the pong's deadline
	if err := s.Emit("after-ping", Message{}); err != nil {
		t.Fatalf("emit: %v", err)
	}
	select {
	case m := <-got:
		if m != `42/smcp,["after-ping"]` {
			t.Fatalf("server read %q", m)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("nothing arrived")
	}
}

// TestClientReadLimit: a WebSocket message over maxClientRead from the
// server closes the client's connection rather than being buffered.
func TestClientReadLimit(t *testing.T) {
	closed := make(chan error, 1)
	ts := fakeEngine(t, func(ws *websocket.Conn) {
		big := append([]byte(`42/smcp,["big","`), bytes.Repeat([]byte("x"), maxClientRead)...)
		_ = ws.WriteMessage(websocket.TextMessage, append(big, `"]`...))
		_, _, err := ws.ReadMessage()
		closed <- err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Dial(ctx, ts.URL, ClientOptions{Namespace: "/smcp", Transport: WebSocketOnly, Handler: clientHandler{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Disconnect()
	select {
	case err := <-closed:
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
			t.Fatalf("server read %v, want close 1009", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client kept reading")
	}
	for deadline := time.Now().Add(2 * time.Second); !s.Closed(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client's socket is still open")
		}
	}
}

// fakeEngine serves a WebSocket-only Engine.IO server written with
// gorilla: it opens the session, accepts the client's connect to /smcp,
// then hands the connection to after.
func fakeEngine(t *testing.T, after func(ws *websocket.Conn)) *httptest.Server {
	up := websocket.Upgrader{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		_ = ws.WriteMessage(websocket.TextMessage, []byte(`0{"sid":"s1","upgrades":[],"pingInterval":25000,"pingTimeout":20000,"maxPayload":1000000}`))
		if _, msg, err := ws.ReadMessage(); err != nil || !strings.HasPrefix(string(msg), "40/smcp,") {
			return
		}
		_ = ws.WriteMessage(websocket.TextMessage, []byte(`40/smcp,{"sid":"n1"}`))
		after(ws)
	}))
	t.Cleanup(ts.Close)
	return ts
}
