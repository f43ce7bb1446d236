package a2c

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// memoryConns is how many idle joined WebSocket sessions the memory
	// test holds; memoryWarm sessions come first and are not counted, so
	// one-off costs (buffers and pools sized on first use) stay out.
	memoryConns = 1000
	memoryWarm  = 50
	// memoryBoundKiB is the per-session bound: generous (the benchmark
	// measures a few KiB), so that only a regression of the kind "a
	// buffer or goroutine stack per idle session" trips it.
	memoryBoundKiB = 32
)

// TestIdleConnectionMemory holds a thousand idle WebSocket sessions, each
// joined to an office as a Computer, and measures the server's resident
// set per session (VmRSS from /proc, each reading taken once it has
// stopped moving). It logs the figure and fails above memoryBoundKiB.
func TestIdleConnectionMemory(t *testing.T) {
	for _, mode := range wsModes {
		t.Run(mode, func(t *testing.T) { idleMemory(t, mode) })
	}
}

func idleMemory(t *testing.T, mode string) {
	srv := startServer(t, "--websocket-mode", mode, "--log-level", "warn")
	pid := srv.Cmd().Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var (
		mu      sync.Mutex
		conns   []*rawWS
		serving sync.WaitGroup
	)
	// Every session is closed and its reader waited for, whatever happens.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.close()
		}
		serving.Wait()
	})
	open := func(from, to int) {
		t.Helper()
		var (
			next   atomic.Int64
			wg     sync.WaitGroup
			errMu  sync.Mutex
			errOne error
		)
		next.Store(int64(from))
		for range 16 {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= to || ctx.Err() != nil {
						return
					}
					c, err := dialRawWS(ctx, srv.Addr)
					if err == nil {
						mu.Lock()
						conns = append(conns, c)
						mu.Unlock()
						err = c.join("computer", fmt.Sprintf("c-%d", i), fmt.Sprintf("mem-%d", i%100))
					}
					if err != nil {
						errMu.Lock()
						errOne = err
						errMu.Unlock()
						return
					}
					// The reader answers the heartbeat and drains the
					// notifications of later joins, as an idle client does.
					serving.Go(c.serve)
				}
			})
		}
		wg.Wait()
		if errOne != nil {
			t.Fatalf("opening sessions: %v", errOne)
		}
	}

	open(0, memoryWarm)
	base := settledRSS(t, pid)
	open(memoryWarm, memoryWarm+memoryConns)
	after := settledRSS(t, pid)
	perConn := float64(after-base) / memoryConns
	t.Logf("%s mode: RSS %d KiB with %d warm-up sessions, %d KiB with %d more: %.1f KiB per idle joined WebSocket session",
		mode, base, memoryWarm, after, memoryConns, perConn)
	if perConn > memoryBoundKiB {
		t.Errorf("%.1f KiB of RSS per idle joined WebSocket session, want at most %d KiB", perConn, memoryBoundKiB)
	}
}

// settledRSS samples the process's VmRSS every 50 ms and returns it once
// twenty consecutive samples (a second) lie within 64 KiB of each other: the
// server has finished allocating for what just happened. It fails the
// test if that takes more than 30 s.
func settledRSS(t *testing.T, pid int) int64 {
	t.Helper()
	const window, slack = 20, 64
	var samples []int64
	var got int64
	eventually(t, 30*time.Second, "server RSS settles", func() (bool, string) {
		kib, err := rssKiB(pid)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, kib)
		if len(samples) > window {
			samples = samples[1:]
		}
		lo, hi := samples[0], samples[0]
		for _, s := range samples {
			lo, hi = min(lo, s), max(hi, s)
		}
		got = hi
		return len(samples) == window && hi-lo <= slack, fmt.Sprintf("last samples %v KiB", samples)
	})
	return got
}
