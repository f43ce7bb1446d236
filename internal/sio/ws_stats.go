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
	// Durations[i] counts the iterations that took at most
	// LoopIterationBuckets[i] and more than the bucket before (not
	// cumulative); the last element counts those above every bucket.
	Durations [len(LoopIterationBuckets) + 1]uint64
	// Total is the time all iterations took together.
	Total time.Duration
}

// SlowLoopIteration is the duration past which an event-loop iteration is
// counted in LoopStats.SlowIterations.
const SlowLoopIteration = 10 * time.Millisecond

// LoopIterationBuckets are the upper bounds of LoopStats.Durations:
// coarse, since a healthy iteration takes microseconds and what matters is
// how far the slow ones go.
var LoopIterationBuckets = [...]time.Duration{
	100 * time.Microsecond, time.Millisecond, SlowLoopIteration, 100 * time.Millisecond, time.Second,
}

// ReadLoopStats returns the event-loop counters. They only grow, so they
// suit Prometheus counters and a histogram (see server/metrics.go). The
// fields are read one by one while the loops run, so they may disagree by
// the iterations that end meanwhile.
func ReadLoopStats() LoopStats {
	st := LoopStats{
		Iterations:     loopIterations.Load(),
		SlowIterations: loopSlowIterations.Load(),
		Total:          time.Duration(loopTotalNs.Load()),
	}
	for i := range st.Durations {
		st.Durations[i] = loopDurations[i].Load()
	}
	return st
}

var (
	loopIterations     atomic.Uint64
	loopSlowIterations atomic.Uint64
	loopTotalNs        atomic.Int64
	loopDurations      [len(LoopIterationBuckets) + 1]atomic.Uint64
	// slowIterationNs is SlowLoopIteration in nanoseconds; a variable so
	// that a test can lower it and see an ordinary iteration counted.
	slowIterationNs atomic.Int64
)

func init() { slowIterationNs.Store(int64(SlowLoopIteration)) }

// countIteration records one loop iteration that took d.
func countIteration(d time.Duration) {
	loopIterations.Add(1)
	loopTotalNs.Add(int64(d))
	i := 0
	for i < len(LoopIterationBuckets) && d > LoopIterationBuckets[i] {
		i++
	}
	loopDurations[i].Add(1)
	if int64(d) > slowIterationNs.Load() {
		loopSlowIterations.Add(1)
	}
}
