package cluster

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/redistest"
)

// pubCounter counts the onErr calls of frames sent in a test.
type pubCounter struct{ n atomic.Int64 }

func (c *pubCounter) fail(error) { c.n.Add(1) }

// TestSendOrderPipelined: frames sent from several goroutines at once are
// published exactly once each (Redis's own count), none fails, and each
// goroutine's frames arrive in the order it sent them, requests and
// broadcasts mixed on one ordered path.
func TestSendOrderPipelined(t *testing.T) {
	r := redistest.Start(t)
	a := startNode(t, fastConfig(r.URL(), "pa"))
	b := startNode(t, fastConfig(r.URL(), "pb"))
	if !a.Pipelined() {
		t.Fatal("a single Redis without TLS should be pipelined")
	}
	if _, err := r.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	const senders, each = 4, 500
	var failed pubCounter
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				f := &Frame{Kind: KindRequest, From: a.ID(), To: "sid", Office: "o", Event: "client:tool_call", Call: uint64(g)<<32 | uint64(i), TimeoutMS: 1000}
				var until time.Time
				if i%3 == 1 {
					f.Kind, until = KindBroadcast, time.Now().Add(5*time.Second)
				}
				a.Send("pb", f, until, failed.fail)
			}
		})
	}
	wg.Wait()
	next := make([]uint64, senders)
	for range senders * each {
		f := recv(t, b.frames)
		g, i := f.Call>>32, f.Call&(1<<32-1)
		if g >= senders || i != next[g] {
			t.Fatalf("frame %d of sender %d, want %d", i, g, next[min(g, senders-1)])
		}
		next[g]++
	}
	if n := failed.n.Load(); n != 0 {
		t.Fatalf("%d frames failed", n)
	}
	if got := r.CommandStats()["publish"]; got != senders*each {
		t.Fatalf("publish: %d, want %d", got, senders*each)
	}
}

// TestSendRequestAtMostOnce: a request sent while Redis is down fails
// (onErr once) and is never published later, while an answer sent at the
// same time is retried and published once Redis is back.
func TestSendRequestAtMostOnce(t *testing.T) {
	r := redistest.Start(t)
	a := startNode(t, fastConfig(r.URL(), "qa"))
	r.Stop()
	var reqFailed, ansFailed pubCounter
	a.Send("nobody", &Frame{Kind: KindRequest, From: "qa", To: "s", Office: "o", Event: "e", Call: 1, TimeoutMS: 1000}, time.Time{}, reqFailed.fail)
	a.Send("nobody", &Frame{Kind: KindAnswer, From: "qa", To: "s", Office: "o", Event: "e", Call: 2}, time.Now().Add(20*time.Second), ansFailed.fail)
	redistest.WaitFor(t, 3*time.Second, "the request failed", func() bool { return reqFailed.n.Load() == 1 })
	r.Restart()
	redistest.WaitFor(t, 5*time.Second, "the answer published", func() bool { return r.CommandStats()["publish"] >= 1 })
	time.Sleep(300 * time.Millisecond) // a request written late would show by now
	if got := r.CommandStats()["publish"]; got != 1 {
		t.Fatalf("publish after the restart: %d, want 1 (the answer only)", got)
	}
	if reqFailed.n.Load() != 1 || ansFailed.n.Load() != 0 {
		t.Fatalf("onErr: request %d, answer %d; want 1, 0", reqFailed.n.Load(), ansFailed.n.Load())
	}
}

// TestSendRedisStalled: Redis stops answering (SIGSTOP) with frames in
// flight: the request fails once its reply is overdue, and is published
// at most once; the answer is retried and arrives when Redis resumes.
func TestSendRedisStalled(t *testing.T) {
	r := redistest.Start(t)
	a := startNode(t, fastConfig(r.URL(), "sa"))
	b := startNode(t, fastConfig(r.URL(), "sb"))
	a.Send("sb", &Frame{Kind: KindBroadcast, From: "sa", Office: "o", Event: "warm"}, time.Now().Add(time.Second), func(error) {})
	recv(t, b.frames)
	pid := redisPID(t, r)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer resume()
	var reqFailed, ansFailed pubCounter
	start := time.Now()
	a.Send("sb", &Frame{Kind: KindRequest, From: "sa", To: "s", Office: "o", Event: "req", Call: 1, TimeoutMS: 1000}, time.Time{}, reqFailed.fail)
	a.Send("sb", &Frame{Kind: KindAnswer, From: "sa", To: "s", Office: "o", Event: "ans", Call: 2}, time.Now().Add(20*time.Second), ansFailed.fail)
	redistest.WaitFor(t, 3*time.Second, "the request failed", func() bool { return reqFailed.n.Load() == 1 })
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("request failed after %v, before its reply was overdue", d)
	}
	resume()
	requests, answers := 0, 0
	deadline := time.After(4 * time.Second)
	for answers == 0 {
		select {
		case f := <-b.frames:
			switch f.Event {
			case "req":
				requests++
			case "ans":
				answers++
			}
		case <-deadline:
			t.Fatal("the answer never arrived")
		}
	}
	time.Sleep(300 * time.Millisecond)
	for len(b.frames) > 0 {
		if (<-b.frames).Event == "req" {
			requests++
		}
	}
	if requests > 1 || reqFailed.n.Load() != 1 || ansFailed.n.Load() != 0 {
		t.Fatalf("request published %d times, onErr request %d answer %d; want ≤ 1, 1, 0", requests, reqFailed.n.Load(), ansFailed.n.Load())
	}
}

// TestSendClose: closing the node fails every frame still waiting (once
// each), ends the publisher's goroutines, and a frame sent after it fails
// at once.
func TestSendClose(t *testing.T) {
	r := redistest.Start(t)
	a := startNode(t, fastConfig(r.URL(), "ca"))
	r.Stop()
	var failed pubCounter
	const n = 50
	for i := range n {
		a.Send("nobody", &Frame{Kind: KindAnswer, From: "ca", To: "s", Office: "o", Event: "e", Call: uint64(i)}, time.Now().Add(time.Minute), failed.fail)
	}
	done := make(chan struct{})
	go func() { a.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if got := failed.n.Load(); got != n {
		t.Fatalf("onErr after Close: %d, want %d", got, n)
	}
	a.Send("nobody", &Frame{Kind: KindRequest, From: "ca", Office: "o", Event: "e", Call: 99}, time.Time{}, failed.fail)
	if got := failed.n.Load(); got != n+1 {
		t.Fatalf("a frame sent after Close did not fail at once")
	}
}

// TestAppendPublish: the command is the RESP array PUBLISH channel frame.
func TestAppendPublish(t *testing.T) {
	f := &Frame{Kind: KindAnswer, From: "n", To: "s", Office: "o", Event: "e", Call: 7, Payload: []byte("xy")}
	frame := AppendFrame(nil, f)
	want := "*3\r\n$7\r\nPUBLISH\r\n$10\r\na2c:{n}:ch\r\n$" + strconv.Itoa(len(frame)) + "\r\n" + string(frame) + "\r\n"
	got, at := appendPublish(nil, "a2c:{n}:ch", f, newSealer(nil, nil))
	if string(got) != want || string(got[at:len(got)-2]) != string(frame) {
		t.Fatalf("got %q (frame at %d), want %q", got, at, want)
	}
	// Sealed: the same command around the sealed frame.
	s := newSealer(testKey, nil)
	got, at = appendPublish(nil, "a2c:{n}:ch", f, s)
	sealed := got[at : len(got)-2]
	if len(sealed) != len(frame)+sealSize || sealed[0] != sealedVersion {
		t.Fatalf("sealed frame %q", sealed)
	}
	want = "*3\r\n$7\r\nPUBLISH\r\n$10\r\na2c:{n}:ch\r\n$" + strconv.Itoa(len(sealed)) + "\r\n" + string(sealed) + "\r\n"
	if string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if b, ok := newSealerLike(s).open("a2c:{n}:ch", append([]byte(nil), sealed...)); !ok || string(b) != string(frame) {
		t.Fatalf("sealed frame does not open: %q %v", b, ok)
	}
}

// redisPID reads the redis-server's process id from INFO server.
func redisPID(t *testing.T, r *redistest.Server) int {
	t.Helper()
	info, err := r.Do("INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if pid, err := strconv.Atoi(v); err == nil {
				return pid
			}
		}
	}
	t.Fatal("no process_id in INFO server")
	return 0
}
