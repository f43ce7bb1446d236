package janitor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestEveryAndStop(t *testing.T) {
	var n atomic.Int32
	j := Start(Every(time.Millisecond, func(time.Time) { n.Add(1) }))
	time.Sleep(50 * time.Millisecond)
	if err := j.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := n.Load()
	if got == 0 {
		t.Error("never ticked")
	}
	time.Sleep(30 * time.Millisecond)
	if n.Load() != got || j.Stop(context.Background()) != nil {
		t.Error("ticked after Stop, or a second Stop failed")
	}
}

func TestStopBoundedByContext(t *testing.T) {
	release := make(chan struct{})
	j := Start(func(<-chan struct{}) { <-release })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := j.Stop(ctx); err != context.DeadlineExceeded {
		t.Errorf("Stop of a stuck loop: %v", err)
	}
	close(release)
}
