package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/redistest"
	"github.com/a2c-smcp/a2c-go/internal/sio"
)

// subOnLoop makes startSubscriber give every subscriber an event loop
// (testLoop), and nodeOnLoop startNode every node: set by
// TestSubscriberOnLoop and TestNodeOnLoop while they run the tests again.
// The package's tests do not run in parallel.
var subOnLoop, nodeOnLoop bool

// testLoop is a Socket.IO server's event loop as a Poller, as the server
// passes its own (server.loopPoller), counting the watches it starts.
type testLoop struct {
	io      *sio.Server
	mu      sync.Mutex
	watches []*sio.Watch
}

func newTestLoop(t *testing.T) *testLoop {
	l := &testLoop{io: sio.NewServer(sio.Options{})}
	t.Cleanup(l.io.Close)
	return l
}

func (l *testLoop) Watch(fd int, ready func() bool) (Watching, error) {
	w, err := l.io.Watch(fd, ready)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.watches = append(l.watches, w)
	l.mu.Unlock()
	return w, nil
}

// live is how many watches have not ended.
func (l *testLoop) live() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, w := range l.watches {
		select {
		case <-w.Done():
		default:
			n++
		}
	}
	return n
}

func (l *testLoop) started() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.watches)
}

// namedTest is a test of the package, run again by runAgain.
type namedTest struct {
	name string
	f    func(*testing.T)
}

// runAgain runs tests as subtests with *flag set.
func runAgain(t *testing.T, flag *bool, tests []namedTest) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			*flag = true
			defer func() { *flag = false }()
			tc.f(t)
		})
	}
}

// TestSubscriberOnLoop runs the subscriber's tests again with its links
// read on an event loop (Config.Poller), as the server runs them: the
// same deliveries, losses, Resumed calls, health checks and closes. A
// rediss:// link is never polled (its bytes need TLS): the TLS test checks
// that it still works beside a Poller.
func TestSubscriberOnLoop(t *testing.T) {
	runAgain(t, &subOnLoop, []namedTest{
		{"Single", TestSubscriberSingle},
		{"Resumed", TestSubscriberResumed},
		{"Outage", TestSubscriberOutage},
		{"Silent", TestSubscriberSilent},
		{"CloseWaits", TestSubscriberCloseWaits},
		{"CloseUnreachable", TestSubscriberCloseUnreachable},
		{"Auth", TestSubscriberAuth},
		{"TLS", TestSubscriberTLS},
		{"Cluster", TestSubscriberCluster},
		{"SlotMigration", TestSubscriberSlotMigration},
	})
}

// TestNodeOnLoop runs the node's tests again with a Poller, as the server
// runs nodes: the subscription links and the publisher's connection are
// read on the loop; ordering, at-most-once, retries, a stalled Redis (the
// reply deadline kept by the connection's goroutine), Close, Redis
// restarts and the healing tests hold the same.
func TestNodeOnLoop(t *testing.T) {
	runAgain(t, &nodeOnLoop, []namedTest{
		{"SendOrderPipelined", TestSendOrderPipelined},
		{"SendRequestAtMostOnce", TestSendRequestAtMostOnce},
		{"SendRedisStalled", TestSendRedisStalled},
		{"SendClose", TestSendClose},
		{"SendRegressionStaleWriteDeadline", TestSendRegressionStaleWriteDeadline},
		{"SendRegressionStaleWriteDeadlineLarge", TestSendRegressionStaleWriteDeadlineLarge},
		{"SendRegressionErrorReply", TestSendRegressionErrorReply},
		{"SendRegressionCloseRace", TestSendRegressionCloseRace},
		{"SendRegressionBreakCycle", TestSendRegressionBreakCycle},
		{"CrossNodeCall", TestCrossNodeCall},
		{"DeadNodeSwept", TestDeadNodeSwept},
		{"RedisRestart", TestRedisRestart},
		{"RedisCluster", TestRedisCluster},
		{"LostEventReloaded", TestLostEventReloaded},
		{"ForgedFramesRefused", TestForgedFramesRefused},
		{"BacklogBound", TestBacklogBound},
	})
}

// loopIfOn is a new testLoop while subOnLoop is set, else nil: for tests
// that make their subscriber themselves.
func loopIfOn(t *testing.T) Poller {
	if !subOnLoop {
		return nil
	}
	return newTestLoop(t)
}

// TestSubscriberPolled: with a Poller, the link is read on the loop
// (Deliver runs on the loop's goroutine), and a message arriving in
// pieces, or many in one read, is delivered whole and in order.
func TestSubscriberPolled(t *testing.T) {
	r := redistest.Start(t)
	noLeaks(t)
	loop := newTestLoop(t)
	var mu sync.Mutex
	var got []string
	onLoop := make(chan bool, 1)
	s := newSubscriber(subscriberConfig{Addrs: []string{addrOf(r)}, OpTimeout: 2 * time.Second, Poller: loop,
		Deliver: func(ch string, p []byte) {
			mu.Lock()
			got = append(got, string(p))
			mu.Unlock()
			select {
			case onLoop <- goroutineRunsLoop():
			default:
			}
		}})
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Subscribe(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if loop.live() != 1 {
		t.Fatalf("%d links on the loop, want 1", loop.live())
	}
	big := string(make([]byte, 300<<10)) // several reads of the loop
	want := []string{"1", big, "2"}
	for _, p := range want {
		publish(t, r, "a", p)
	}
	redistest.WaitFor(t, 5*time.Second, "delivery", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 })
	mu.Lock()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d: %d bytes, want %d", i, len(got[i]), len(want[i]))
		}
	}
	mu.Unlock()
	if !<-onLoop {
		t.Fatal("Deliver did not run on the event loop")
	}
}

// goroutineRunsLoop reports whether the calling goroutine is an event
// loop's (its stack holds the loop's run).
func goroutineRunsLoop() bool {
	buf := make([]byte, 64<<10)
	return containsBytes(buf[:runtime.Stack(buf, false)], "sio.(*loop).run")
}

func containsBytes(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return true
		}
	}
	return false
}

// TestSubscriberLoopClosed: when the loop closes under a polled link
// (the server shutting down before the node), the link is made again on
// a reader goroutine, its channels named to Resumed, and messages flow.
func TestSubscriberLoopClosed(t *testing.T) {
	r := redistest.Start(t)
	noLeaks(t)
	loop := newTestLoop(t)
	k := &sink{}
	s := startSubscriber(t, subscriberConfig{Addrs: []string{addrOf(r)}, Poller: loop}, k)
	if err := s.Subscribe(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if loop.live() != 1 {
		t.Fatalf("%d links on the loop, want 1", loop.live())
	}
	loop.io.Close()
	redistest.WaitFor(t, 5*time.Second, "Resumed", func() bool { return k.resumedAll("a") })
	if loop.live() != 0 || loop.started() != 1 {
		t.Fatalf("watches: %d live of %d", loop.live(), loop.started())
	}
	redistest.WaitFor(t, 2*time.Second, "delivery", func() bool { publish(t, r, "a", "x"); return k.has("a", "x") })
}

// A Poller that refuses (no loop on this system) leaves the link on a
// reader goroutine.
func TestSubscriberPollerRefuses(t *testing.T) {
	r := redistest.Start(t)
	noLeaks(t)
	k := &sink{}
	s := startSubscriber(t, subscriberConfig{Addrs: []string{addrOf(r)}, Poller: refusingPoller{}}, k)
	if err := s.Subscribe(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	publish(t, r, "a", "1")
	redistest.WaitFor(t, 2*time.Second, "delivery", func() bool { return k.has("a", "1") })
}

type refusingPoller struct{}

func (refusingPoller) Watch(int, func() bool) (Watching, error) {
	return nil, errors.New("no loop")
}

// TestNodePolled: a node given a Poller reads both its subscription link
// and its publishing connection on the loop, and lets go of both (the
// watches ended, the connections closed in Redis) when it closes.
func TestNodePolled(t *testing.T) {
	r := redistest.Start(t)
	loop := newTestLoop(t)
	cfg := fastConfig(r.URL(), "lp")
	cfg.Poller = loop
	a := startNode(t, cfg)
	b := startNode(t, fastConfig(r.URL(), "lq"))
	if !a.Pipelined() || loop.live() != 2 {
		t.Fatalf("pipelined %v, %d connections on the loop, want 2", a.Pipelined(), loop.live())
	}
	// Both ways: a's PUBLISH replies and b's frames are read on the loop.
	for i := range 50 {
		b.Send("lp", &Frame{Kind: KindAnswer, From: "lq", To: "s", Office: "o", Event: "client:tool_call", Call: uint64(i)}, time.Now().Add(time.Second), nil)
		a.Send("lq", &Frame{Kind: KindAnswer, From: "lp", To: "s", Office: "o", Event: "client:tool_call", Call: uint64(i)}, time.Now().Add(time.Second), nil)
	}
	for i := range 50 {
		if f := recv(t, a.frames); f.Call != uint64(i) {
			t.Fatalf("a got call %d, want %d", f.Call, i)
		}
		if f := recv(t, b.frames); f.Call != uint64(i) {
			t.Fatalf("b got call %d, want %d", f.Call, i)
		}
	}
	redistest.WaitFor(t, 2*time.Second, "a's replies settled", func() bool { return a.Backlog() == 0 })
	a.Close()
	if loop.live() != 0 {
		t.Fatalf("%d watches outlived Close", loop.live())
	}
	redistest.WaitFor(t, 2*time.Second, "a's connections closed in Redis", func() bool {
		list, err := r.Do("CLIENT", "LIST")
		return err == nil && !strings.Contains(list, "name=a2c-lp-")
	})
}

// TestPublisherClosedWhileConnecting: a publisher that closes while its
// connection is being made lets the connection's watch go off its mutex.
// The review's reproduction: a Redis that sends a stray reply at once
// has the loop settle replies under publisher.mu while connect, holding
// it, waited in Stop for the loop: the loop, and every WebSocket on it,
// froze.
func TestPublisherClosedWhileConnecting(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 512)
		_, _ = c.Read(buf)                 // CLIENT SETNAME
		_, _ = c.Write([]byte("+OK\r\n"))  // its reply
		time.Sleep(100 * time.Millisecond) // the connection is made
		_, _ = c.Write([]byte(":1\r\n"))   // a reply to nothing
		_, _ = c.Read(buf)                 // until the publisher lets go
	}()
	loop := newTestLoop(t)
	n := &Node{cfg: Config{Poller: loop, OpTimeout: time.Second}, id: "pc", log: slog.New(slog.DiscardHandler)}
	n.backlog.max = DefaultMaxBacklog
	p := newPublisher(n, l.Addr().String(), nil)
	p.mu.Lock()
	p.closed = true
	done := make(chan bool)
	go func() { done <- p.connect() }()
	// The stray reply reaches the loop, whose ready waits for p.mu; then
	// connect gets it, finds the publisher closed, and must not wait for
	// ready while holding it.
	redistest.WaitFor(t, 2*time.Second, "the connection on the loop", func() bool { return loop.live() == 1 })
	time.Sleep(200 * time.Millisecond) // the loop reads the stray reply
	p.mu.Unlock()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("a closed publisher connected")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("connect hung: Stop waited under publisher.mu for the loop, which waited for it")
	}
	redistest.WaitFor(t, 2*time.Second, "the watch ended", func() bool { return loop.live() == 0 })
}
