//go:build linux

package sio

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketPair returns a connected pair of non-blocking stream sockets,
// closed at the end of the test.
func socketPair(t *testing.T) (a, b int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds[0], fds[1]
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not done after 5 s", what)
	}
}

// TestWatch: a watched descriptor is read on the loop as bytes arrive,
// until ready returns false, which ends the watch.
func TestWatch(t *testing.T) {
	s := NewServer(Options{})
	defer s.Close()
	a, b := socketPair(t)
	got := make(chan string, 8)
	w, err := s.Watch(a, func() bool {
		buf := make([]byte, 64)
		n, err := unix.Read(a, buf)
		if errors.Is(err, unix.EAGAIN) {
			return true
		}
		if n <= 0 {
			got <- "EOF"
			return false
		}
		got <- string(buf[:n])
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"one", "two"} {
		if _, err := unix.Write(b, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			if m != msg {
				t.Fatalf("read %q, want %q", m, msg)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q never read", msg)
		}
	}
	if _, err := s.Watch(a, func() bool { return true }); err == nil {
		t.Fatal("a descriptor watched twice")
	}
	_ = unix.Shutdown(b, unix.SHUT_WR)
	waitClosed(t, w.Done(), "watch after EOF")
	if m := <-got; m != "EOF" {
		t.Fatalf("read %q, want EOF", m)
	}
	w.Stop() // ended already: a no-op
	// The descriptor is free again once the watch ended.
	w2, err := s.Watch(a, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	w2.Stop()
}

// TestWatchStopWaits: Stop returns only once a running ready has
// returned, and ready never runs after it.
func TestWatchStopWaits(t *testing.T) {
	s := NewServer(Options{})
	defer s.Close()
	a, b := socketPair(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	var running, after atomic.Int32
	var stopped atomic.Bool
	w, err := s.Watch(a, func() bool {
		if stopped.Load() {
			after.Add(1)
		}
		running.Add(1)
		defer running.Add(-1)
		select {
		case <-entered:
		default:
			close(entered)
			<-release
		}
		var buf [16]byte
		_, _ = unix.Read(a, buf[:])
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(b, []byte("x")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, entered, "ready")
	done := make(chan struct{})
	go func() { w.Stop(); close(done) }()
	select {
	case <-done:
		t.Fatal("Stop returned while ready was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	waitClosed(t, done, "Stop")
	stopped.Store(true)
	if running.Load() != 0 {
		t.Fatal("ready running after Stop")
	}
	waitClosed(t, w.Done(), "Done after Stop")
	// Bytes that arrive now are not read on the loop.
	if _, err := unix.Write(b, []byte("y")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // give a wrong event the time to show
	if after.Load() != 0 {
		t.Fatal("ready ran after Stop")
	}
}

// TestWatchServerClose: closing the server ends every watch, and a
// server without a loop refuses one.
func TestWatchServerClose(t *testing.T) {
	s := NewServer(Options{})
	a, _ := socketPair(t)
	w, err := s.Watch(a, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	waitClosed(t, w.Done(), "watch after Close")
	w.Stop()
	if _, err := s.Watch(a, func() bool { return true }); err == nil {
		t.Fatal("a watch on a closed server")
	}
	// A server closed before it had a loop makes none for a watch.
	early := NewServer(Options{})
	early.Close()
	base := runtime.NumGoroutine()
	if _, err := early.Watch(a, func() bool { return true }); err == nil {
		t.Fatal("a watch on a server closed before its first loop")
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Fatalf("goroutines %d -> %d: a loop started after Close", base, n)
	}
	perConn := NewServer(Options{GoroutinePerConn: true})
	defer perConn.Close()
	if _, err := perConn.Watch(a, func() bool { return true }); !errors.Is(err, ErrNoLoop) {
		t.Fatalf("GoroutinePerConn: %v, want ErrNoLoop", err)
	}
}
