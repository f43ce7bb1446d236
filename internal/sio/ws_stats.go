package sio

import (
	"sync/atomic"
	"time"
)

// LoopStats counts the work of the WebSocket event loops of every Server
// in the process (all zero where there is no event loop, or with
// GoroutinePerConn). An iteration is one return from epoll_wait and the
// handling of the events it reported: reading, frame parsing, and the
// namespace handlers' Event calls, which run on the loop. A slow iteration
// means a handler blocked (which the Handler contract forbids) or the loop
// was overloaded or starved of CPU; every other WebSocket on that loop
// waited that long.
type LoopStats struct {
	Iterations     uint64 // loop iterations since the process started
	SlowIterations uint64 // iterations that took longer than SlowLoopIteration
}

// SlowLoopIteration is the duration past which an event-loop iteration is
// counted in LoopStats.SlowIterations.
const SlowLoopIteration = 10 * time.Millisecond

// ReadLoopStats returns the event-loop counters. They only grow, so they
// suit Prometheus counters (see server/metrics.go).
func ReadLoopStats() LoopStats {
	return LoopStats{Iterations: loopIterations.Load(), SlowIterations: loopSlowIterations.Load()}
}

var (
	loopIterations     atomic.Uint64
	loopSlowIterations atomic.Uint64
	// slowIterationNs is SlowLoopIteration in nanoseconds; a variable so
	// that a test can lower it and see an ordinary iteration counted.
	slowIterationNs atomic.Int64
)

func init() { slowIterationNs.Store(int64(SlowLoopIteration)) }

// countIteration records one loop iteration that took d.
func countIteration(d time.Duration) {
	loopIterations.Add(1)
	if int64(d) > slowIterationNs.Load() {
		loopSlowIterations.Add(1)
	}
}
