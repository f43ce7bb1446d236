package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// The baseline is the relay's topology with nothing but WebSocket: a
// client sends a frame to a forwarder process, which writes it to an echo
// peer over a second WebSocket; the peer answers and the forwarder writes
// the answer back. Two loopback hops each way, one process in the middle,
// the same frame sizes as a relayed tool call.

// runForwarder is the middle process: the first connection to /peer is
// the echo peer, every frame from /client goes to it and back.
func runForwarder() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	up := websocket.Upgrader{}
	peerc := make(chan *websocket.Conn, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/peer", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err == nil {
			peerc <- c
		}
	})
	mux.HandleFunc("/client", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		p := <-peerc
		go func() { // answers from the peer go back to the client
			for {
				t, m, err := p.ReadMessage()
				if err != nil || c.WriteMessage(t, m) != nil {
					return
				}
			}
		}()
		for {
			t, m, err := c.ReadMessage()
			if err != nil || p.WriteMessage(t, m) != nil {
				return
			}
		}
	})
	fmt.Printf("listening %s\n", ln.Addr())
	_ = http.Serve(ln, mux)
}

// relayFrame and answerFrame have the sizes of a relayed tool call and its
// answer as they travel between the load client and the server.
var (
	relayFrame  = []byte(`42/smcp,12["client:tool_call",{"agent":"a","req_id":"0-12","computer":"c","tool_name":"b__echo","params":{"text":"hello"},"timeout":30}]`)
	answerFrame = []byte(`43/smcp,12[{"content":[{"type":"text","text":"ok"}],"isError":false}]`)
)

func measureBaseline(warm, dur time.Duration) levelResult {
	exe, err := os.Executable()
	check(err)
	cmd := exec.Command(exe, "forwarder")
	out, err := cmd.StdoutPipe()
	check(err)
	check(cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	check(err)
	addr := strings.TrimSpace(strings.TrimPrefix(line, "listening "))

	peer, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/peer", nil)
	check(err)
	defer peer.Close()
	go func() {
		for {
			_, _, err := peer.ReadMessage()
			if err != nil || peer.WriteMessage(websocket.TextMessage, answerFrame) != nil {
				return
			}
		}
	}()
	c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/client", nil)
	check(err)
	defer c.Close()
	var lat []time.Duration
	fwd := &server{cmd: cmd}
	var c0 int64
	end := time.Now().Add(warm + dur)
	measureFrom := time.Now().Add(warm)
	for now := time.Now(); now.Before(end); now = time.Now() {
		if c0 == 0 && now.After(measureFrom) {
			c0 = fwd.cpuTicks()
		}
		check(c.WriteMessage(websocket.TextMessage, relayFrame))
		_, _, err := c.ReadMessage()
		check(err)
		if now.After(measureFrom) {
			lat = append(lat, time.Since(now))
		}
	}
	c1 := fwd.cpuTicks()
	slices.Sort(lat)
	return levelResult{agents: 1, calls: len(lat), seconds: dur.Seconds(), p50: lat[len(lat)/2], p99: lat[len(lat)*99/100],
		cpuPerCall: time.Duration(float64(c1-c0) * float64(10*time.Millisecond) / float64(len(lat)))}
}
