package sio

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestMsgReader reads a run of messages of mixed sizes: each arrives
// whole, a message handed on is never overwritten by a later one, and a
// large scratch buffer is not kept for small messages.
func TestMsgReader(t *testing.T) {
	sizes := []int{10, 100 << 10, 350 << 10, 350 << 10, 5, 1 << 20, 3, 200 << 10, 0, 70 << 10, 64 << 10}
	msg := func(i, n int) []byte { return bytes.Repeat([]byte{'a' + byte(i)}, n) }
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for i, n := range sizes {
			if ws.WriteMessage(websocket.BinaryMessage, msg(i, n)) != nil {
				return
			}
		}
		_, _, _ = ws.ReadMessage() // until the client closes
	}))
	defer srv.Close()
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	var r msgReader
	var got [][]byte
	for i, n := range sizes {
		typ, b, err := r.read(ws, time.Now().Add(10*time.Second))
		if err != nil || typ != websocket.BinaryMessage || len(b) != n {
			t.Fatalf("message %d: type %d, %d bytes, %v; want %d bytes", i, typ, len(b), err, n)
		}
		got = append(got, b)
		if cap(r.buf) > 64<<10 && n < cap(r.buf)/16 {
			t.Fatalf("message %d (%d bytes) left a scratch of %d", i, n, cap(r.buf))
		}
	}
	for i, n := range sizes {
		if !bytes.Equal(got[i], msg(i, n)) {
			t.Fatalf("message %d changed after later reads", i)
		}
	}
}
