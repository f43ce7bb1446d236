package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// TestStalledBodiesCut sends requests whose body stops half way, on the
// Engine.IO path (refused by the version gate, and a live session) and on
// other routes: each is answered, and none holds its connection past
// BodyIdleTimeout.
func TestStalledBodiesCut(t *testing.T) {
	_, url := newTestServer(t, Config{BodyIdleTimeout: 200 * time.Millisecond})
	resp, err := http.Get(url + "/socket.io/?EIO=4&transport=polling&" + smcp.QueryVersion + "=" + smcp.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	var open struct{ SID string }
	b := make([]byte, 512)
	n, _ := resp.Body.Read(b)
	resp.Body.Close()
	_ = jsonUnmarshalOpen(b[:n], &open)
	for _, target := range []string{
		"/socket.io/?EIO=4&transport=polling",                 // refused by the gate
		"/socket.io/?EIO=4&transport=polling&sid=" + open.SID, // a live session
		"/healthz", // another route
		"/nowhere",
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n42/smcp,[", target)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("POST %s with a stalled body: %v", target, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("POST %s with a stalled body: %d", target, resp.StatusCode)
		}
	}
}

func jsonUnmarshalOpen(b []byte, v any) error {
	if len(b) == 0 {
		return fmt.Errorf("empty open packet")
	}
	return json.Unmarshal(b[1:], v)
}
