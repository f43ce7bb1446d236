package janitor

import (
	"context"
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
