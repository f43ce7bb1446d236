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
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// The baseline is the relay's topology with nothing but WebSocket: a
// client sends a frame to a forwarder process, which writes it to an echo
// peer over a second WebSocket; the peer answers and the forwarder writes
// the answer back. Two loopback hops each way, one process in the middle,
// the same frame sizes as a relayed tool call. At N agents there are N
// such client/peer pairs, each client calling in a loop as an Agent does:
// the forwarder's CPU per round trip is the floor a relay can approach.

// runForwarder is the middle process: each connection to /client is
// paired with the next connection to /peer (the echo peers connect
// first), and every frame from the client goes to its peer and back.
func runForwarder() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	up := websocket.Upgrader{}
	peerc := make(chan *websocket.Conn)
	mux := http.NewServeMux()
	mux.HandleFunc("/peer", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err == nil {
			peerc <- c // waits for its client; the forwarder is killed at the end
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

// measureBaseline runs agents client/peer pairs through a fresh forwarder
// process for warm+dur and reports the round trips of the last dur and
// the forwarder's CPU per round trip.
func measureBaseline(agents int, warm, dur time.Duration) levelResult {
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

	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range agents {
		peer, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/peer", nil)
		check(err)
		conns = append(conns, peer)
		go func() { // ends when the connection is closed at return
			for {
				_, _, err := peer.ReadMessage()
				if err != nil || peer.WriteMessage(websocket.TextMessage, answerFrame) != nil {
					return
				}
			}
		}()
	}
	clients := make([]*websocket.Conn, agents)
	for i := range clients {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/client", nil)
		check(err)
		conns = append(conns, c)
		clients[i] = c
	}
	var (
		measuring, stop atomic.Bool
		wg              sync.WaitGroup
		lat             = make([][]time.Duration, agents)
	)
	for i, c := range clients {
		wg.Go(func() {
			for !stop.Load() {
				t0 := time.Now()
				check(c.WriteMessage(websocket.TextMessage, relayFrame))
				_, _, err := c.ReadMessage()
				check(err)
				if measuring.Load() {
					lat[i] = append(lat[i], time.Since(t0))
				}
			}
		})
	}
	fwd := &server{cmd: cmd}
	time.Sleep(warm)
	c0 := fwd.cpuTicks()
	t0 := time.Now()
	measuring.Store(true)
	time.Sleep(dur)
	measuring.Store(false)
	elapsed := time.Since(t0)
	c1 := fwd.cpuTicks()
	stop.Store(true)
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	r := levelResult{agents: agents, calls: len(all), seconds: elapsed.Seconds()}
	if len(all) > 0 {
		r.p50, r.p99 = all[len(all)/2], all[len(all)*99/100]
		r.cpuPerCall = time.Duration(float64(c1-c0) * float64(10*time.Millisecond) / float64(len(all)))
	}
	return r
}
