//go:build autobahn && linux

package sio

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// The Autobahn|Testsuite conformance run, kept out of ordinary builds by
// the autobahn tag. It serves a bare WebSocket echo (every message sent
// back as it came, no Engine.IO) through the same peers as the server:
// the event loop at /loop and gorilla/websocket at /goroutine.
//
//	go test -tags autobahn -run TestAutobahn -v ./internal/sio/
//
// runs the fuzzing client (wstest, or the command in AUTOBAHN_WSTEST)
// against both and fails on any case not passed (OK, NON-STRICT or
// INFORMATIONAL); the reports stay in AUTOBAHN_REPORTS if set. With
// AUTOBAHN_SERVE=host:port it only serves, until interrupted, for a
// fuzzing client run elsewhere (a container).

// echoOwner sends every message back on the peer that read it.
type echoOwner struct{}

func (echoOwner) wsFrame(p wsPeer, f frame) bool { return p.send([]frame{f}, true) == nil }
func (echoOwner) wsClosed(wsPeer, string)        {}

func autobahnEcho(t *testing.T) http.Handler {
	// The suite's largest messages are 16 MiB; its slowest reader lags.
	o := Options{MaxPayload: 32 << 20, MaxBuffered: 256 << 20, PingInterval: time.Minute, PingTimeout: time.Minute}
	o.defaults()
	srv := &Server{opts: o}
	ls, err := newLoopSet(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ls.stop)
	mux := http.NewServeMux()
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := ls.acceptFor(w, r, echoOwner{}, o.MaxPayload, o.MaxBuffered, func(*loopPeer) {}); !ok {
			http.Error(w, "not servable by the event loop", http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/goroutine", func(w http.ResponseWriter, r *http.Request) {
		acceptGorilla(srv, w, r, echoOwner{}, func(wsPeer) {})
	})
	return mux
}

func TestAutobahn(t *testing.T) {
	addr := os.Getenv("AUTOBAHN_SERVE")
	serveOnly := addr != ""
	if !serveOnly {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: autobahnEcho(t), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	if serveOnly {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		t.Logf("echo on ws://%s/loop and ws://%s/goroutine; interrupt to stop", ln.Addr(), ln.Addr())
		<-ctx.Done()
		return
	}
	wstest := os.Getenv("AUTOBAHN_WSTEST")
	if wstest == "" {
		wstest = "wstest"
	}
	if _, err := exec.LookPath(wstest); err != nil {
		t.Skipf("no %s (Autobahn|Testsuite's fuzzing client): %v", wstest, err)
	}
	dir := os.Getenv("AUTOBAHN_REPORTS")
	if dir == "" {
		dir = t.TempDir()
	}
	spec := map[string]any{
		"outdir": dir,
		"servers": []map[string]string{
			{"agent": "sio-loop", "url": "ws://" + ln.Addr().String() + "/loop"},
			{"agent": "sio-goroutine", "url": "ws://" + ln.Addr().String() + "/goroutine"},
		},
		"cases": []string{"*"},
		// 12.* and 13.* are permessage-deflate, which we do not offer.
		"exclude-cases":       []string{"12.*", "13.*"},
		"exclude-agent-cases": map[string]any{},
	}
	b, _ := json.Marshal(spec)
	specPath := filepath.Join(t.TempDir(), "fuzzingclient.json")
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, wstest, "-m", "fuzzingclient", "-s", specPath)
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", wstest, err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index map[string]map[string]struct {
		Behavior      string `json:"behavior"`
		BehaviorClose string `json:"behaviorClose"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	passed := map[string]bool{"OK": true, "NON-STRICT": true, "INFORMATIONAL": true}
	for agent, cases := range index {
		ids := make([]string, 0, len(cases))
		for id := range cases {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			c := cases[id]
			if !passed[c.Behavior] || !passed[c.BehaviorClose] {
				t.Errorf("%s case %s: %s, close %s", agent, id, c.Behavior, c.BehaviorClose)
			}
		}
		t.Logf("%s: %d cases", agent, len(cases))
	}
}

// TestAutobahnEchoSmoke checks the echo endpoints themselves, so that a
// failing suite run points at the peers, not at the harness.
func TestAutobahnEchoSmoke(t *testing.T) {
	ts := httptest.NewServer(autobahnEcho(t))
	defer ts.Close()
	for _, path := range []string{"/loop", "/goroutine"} {
		t.Run(path, func(t *testing.T) {
			w := dialRawAt(t, ts.URL, path)
			w.frame(false, opText, []byte("hé"[:2]), true)
			w.frame(true, opPing, []byte("p"), true)
			w.frame(true, opCont, []byte("hé"[2:]), true)
			if op, b := w.read(); op != opPong || string(b) != "p" {
				t.Fatalf("pong = %d %q", op, b)
			}
			if op, b := w.read(); op != opText || string(b) != "hé" {
				t.Fatalf("echo = %d %q", op, b)
			}
			w.frame(true, opBinary, []byte{0, 0xff}, true)
			if op, b := w.read(); op != opBinary || string(b) != "\x00\xff" {
				t.Fatalf("echo = %d %q", op, b)
			}
			w.frame(true, opClose, closePayload(closeNormal), true)
			if b := w.closed(); string(b[:2]) != string(closePayload(closeNormal)) {
				t.Fatalf("close = %v", b)
			}
		})
	}
}
