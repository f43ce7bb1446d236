package sio

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// echoHandler answers "echo" with its arguments and records disconnects.
type echoHandler struct {
	mu      sync.Mutex
	reasons []string
	socks   chan *Socket
}

func (h *echoHandler) Connect(s *Socket) error {
	var auth struct{ Token string }
	_ = json.Unmarshal(s.Handshake().Auth, &auth)
	if auth.Token == "bad" {
		return &ConnectError{Message: "unauthorized", Data: map[string]int{"code": 401}}
	}
	if h.socks != nil {
		h.socks <- s
	}
	return nil
}

func (h *echoHandler) Event(s *Socket, e *Event) {
	switch e.Name {
	case "echo":
		_ = e.Ack(e.Message)
	case "ask":
		// Ask the client back and relay its answer.
		s.Request("question", e.Message, 5*time.Second, func(m Message, err error) {
			if err != nil {
				_ = e.Ack(Message{Args: []json.RawMessage{json.RawMessage(`"error"`)}})
				return
			}
			_ = e.Ack(m)
		})
	}
}

func (h *echoHandler) Disconnect(s *Socket, reason string) {
	h.mu.Lock()
	h.reasons = append(h.reasons, reason)
	h.mu.Unlock()
}

type clientHandler struct{}

func (clientHandler) Event(s *Socket, e *Event) {
	if e.Name == "question" {
		_ = e.Ack(Message{Args: []json.RawMessage{json.RawMessage(`"answer"`)}})
	}
}
func (clientHandler) Disconnect(*Socket, string) {}

func request(t *testing.T, s *Socket, name string, m Message) Message {
	t.Helper()
	ch := make(chan Message, 1)
	errc := make(chan error, 1)
	s.Request(name, m, 5*time.Second, func(m Message, err error) {
		if err != nil {
			errc <- err
			return
		}
		ch <- m
	})
	select {
	case m := <-ch:
		return m
	case err := <-errc:
		t.Fatalf("request %s: %v", name, err)
	}
	return Message{}
}

// modes are the two ways the server serves WebSockets.
var modes = []struct {
	name string
	opts Options
}{{"event-loop", Options{}}, {"goroutine-per-conn", Options{GoroutinePerConn: true}}}

func TestRoundTrip(t *testing.T) {
	for _, mode := range modes {
		for _, tr := range []struct {
			name string
			t    Transport
		}{{"polling-first", PollingFirst}, {"websocket-only", WebSocketOnly}, {"polling-only", PollingOnly}} {
			t.Run(mode.name+"/"+tr.name, func(t *testing.T) { roundTrip(t, mode.opts, tr.t) })
		}
	}
}

func roundTrip(t *testing.T, opts Options, transport Transport) {
	h := &echoHandler{}
	srv := NewServer(opts)
	srv.Handle("/smcp", h)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Dial(ctx, ts.URL, ClientOptions{Namespace: "/smcp", Transport: transport, Handler: clientHandler{}, Auth: map[string]string{"token": "ok"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() == "" {
		t.Fatal("no socket id")
	}
	m := request(t, s, "echo", Message{Args: []json.RawMessage{json.RawMessage(`{"a":[1,2,"x"]}`), json.RawMessage(`"é\u2028"`)}})
	if len(m.Args) != 2 || string(m.Args[0]) != `{"a":[1,2,"x"]}` || string(m.Args[1]) != `"é\u2028"` {
		t.Fatalf("echo = %q", m.Args)
	}
	bin := request(t, s, "echo", Message{Args: []json.RawMessage{json.RawMessage(`{"_placeholder":true,"num":0}`)}, Attachments: [][]byte{{0, 1, 2, 255}}})
	if len(bin.Attachments) != 1 || string(bin.Attachments[0]) != "\x00\x01\x02\xff" {
		t.Fatalf("binary echo = %v", bin)
	}
	back := request(t, s, "ask", Message{})
	if string(back.Args[0]) != `"answer"` {
		t.Fatalf("ask = %q", back.Args)
	}
	s.Disconnect()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		n := len(h.reasons)
		h.mu.Unlock()
		if n == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("server saw no disconnect")
}

func TestConnectRefused(t *testing.T) {
	srv := NewServer(Options{})
	srv.Handle("/smcp", &echoHandler{})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Dial(ctx, ts.URL, ClientOptions{Namespace: "/smcp", Auth: map[string]string{"token": "bad"}})
	ce, ok := err.(*ConnectError)
	if !ok || ce.Message != "unauthorized" || string(ce.Data.(json.RawMessage)) != `{"code":401}` {
		t.Fatalf("err = %#v", err)
	}
	_, err = Dial(ctx, ts.URL, ClientOptions{Namespace: "/other"})
	if ce, ok := err.(*ConnectError); !ok || ce.Message != "Invalid namespace" {
		t.Fatalf("err = %#v", err)
	}
}

func TestServerDisconnectFailsPending(t *testing.T) {
	h := &echoHandler{socks: make(chan *Socket, 1)}
	srv := NewServer(Options{})
	srv.Handle("/smcp", h)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, ts.URL, ClientOptions{Namespace: "/smcp", Handler: clientHandler{}})
	if err != nil {
		t.Fatal(err)
	}
	ss := <-h.socks
	// The server asks something the client never answers (clientHandler
	// ignores "x"), with an ack timeout far beyond the test's wait, then
	// the client leaves: the request must fail with ErrClosed, never time
	// out.
	got := make(chan error, 1)
	ss.Request("x", Message{}, time.Minute, func(_ Message, err error) { got <- err })
	c.Disconnect()
	select {
	case err := <-got:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pending request was not failed by the disconnect")
	}
}

// TestConnectTimeout checks that an Engine.IO connection that never joins
// a namespace is closed.
func TestConnectTimeout(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			o := mode.opts
			o.ConnectTimeout = 100 * time.Millisecond
			srv := NewServer(o)
			srv.Handle("/smcp", &echoHandler{})
			ts := httptest.NewServer(srv)
			defer ts.Close()
			defer srv.Close()
			resp, err := http.Get(ts.URL + "/socket.io/?EIO=4&transport=polling")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if srv.Conns() != 1 {
				t.Fatalf("conns = %d", srv.Conns())
			}
			deadline := time.Now().Add(3 * time.Second)
			for srv.Conns() != 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := srv.Conns(); n != 0 {
				t.Fatalf("%d connections still open after the connect timeout", n)
			}
		})
	}
}
