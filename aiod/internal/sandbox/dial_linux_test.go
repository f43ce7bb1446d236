package sandbox

import (
	"bufio"
	"context"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serve starts, in s, a server on 127.0.0.1:port (0: any) that answers
// every connection with word, and returns its port.
func serve(t *testing.T, s *Sandbox, port int, word string) int {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", "-c", `import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", `+strconv.Itoa(port)+`)); s.listen(8)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"`+word+`\n"); c.close()`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Wrap(cmd, cmd.Start)(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("server %s: %v", word, err)
	}
	p, _ := strconv.Atoi(strings.TrimSpace(line))
	return p
}

func answer(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	return strings.TrimSpace(string(b))
}

// TestDialContext: two sandboxes of network none serve on one port of
// their own loopbacks; DialContext reaches each one's own, a plain dial
// from the host neither, and a closed port is refused.
func TestDialContext(t *testing.T) {
	a, _ := newSandbox(t, Config{Network: NetworkNone})
	b, _ := newSandbox(t, Config{Network: NetworkNone})
	port := serve(t, a, 0, "a")
	serve(t, b, port, "b")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		s          *Sandbox
		addr, want string
	}{
		{a, "127.0.0.1:" + strconv.Itoa(port), "a"},
		{b, "127.0.0.1:" + strconv.Itoa(port), "b"},
		{a, "localhost:" + strconv.Itoa(port), "a"},
	} {
		conn, err := c.s.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			t.Fatalf("%s: %v", c.addr, err)
		}
		if got := answer(t, conn); got != c.want {
			t.Errorf("%s: %q, want %q", c.addr, got, c.want)
		}
	}
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second); err == nil {
		if got := answer(t, conn); got == "a" || got == "b" {
			t.Errorf("the host reached a sandbox's server: %q", got)
		}
	}
	if _, err := a.DialContext(ctx, "tcp", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a closed port: %v", err)
	}
	for _, bad := range []struct{ network, addr string }{
		{"udp", "127.0.0.1:80"}, {"tcp", "example.com:80"}, {"tcp", "127.0.0.1:0"}, {"tcp4", "[::1]:80"}, {"tcp", "127.0.0.1"},
	} {
		if _, err := a.DialContext(ctx, bad.network, bad.addr); err == nil {
			t.Errorf("%s %s: no error", bad.network, bad.addr)
		}
	}
	// A context that ends first ends the dial (a port of the host's
	// loopback would answer; the sandbox's accepts nothing unlistened).
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := a.DialContext(done, "tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
		t.Error("a dial with an ended context succeeded")
	}
}

// TestDialContextHost: under the host's network DialContext is a plain
// dial.
func TestDialContextHost(t *testing.T) {
	s, _ := newSandbox(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = c.Write([]byte("host\n"))
			c.Close()
		}
	}()
	conn, err := s.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got := answer(t, conn); got != "host" {
		t.Errorf("%q", got)
	}
}
