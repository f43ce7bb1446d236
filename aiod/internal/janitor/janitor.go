package janitor

import (
	"context"
	"runtime/debug"
	"sync"
	"time"
)

// Janitor runs one housekeeping loop until Stop.
type Janitor struct {
	stop, done chan struct{}
	once       sync.Once
}

// Start runs loop on its own goroutine; loop returns when stop closes.
func Start(loop func(stop <-chan struct{})) *Janitor {
	j := &Janitor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(j.done)
		loop(j.stop)
	}()
	return j
}

// Every is a loop that calls tick every d (clamped to 10 ms..30 s).
func Every(d time.Duration, tick func(now time.Time)) func(stop <-chan struct{}) {
	return func(stop <-chan struct{}) {
		t := time.NewTicker(min(max(d, 10*time.Millisecond), 30*time.Second))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				tick(now)
			}
		}
	}
}

// Stop ends the loop and waits for it, or for ctx. It may be called more
// than once.
func (j *Janitor) Stop(ctx context.Context) error {
	j.once.Do(func() { close(j.stop) })
	select {
	case <-j.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Trimmer returns a tick (for [Every]) that hands the heap back to the
// kernel (debug.FreeOSMemory) once after each burst of activity: when
// last (the latest activity, Unix ns) is at least quiet old and newer
// than the latest trim. A daemon idles most of its life, and its
// resident size is what it costs; an idle one is never collected again.
func Trimmer(quiet time.Duration, last func() int64) func(now time.Time) {
	var trimmed int64
	return func(now time.Time) {
		if l := last(); l != trimmed && now.Sub(time.Unix(0, l)) >= quiet {
			debug.FreeOSMemory()
			trimmed = l
		}
	}
}
