package watch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkWatchBurst: a writer makes 10,000 small files in a watched
// tree as fast as it can while a reader polls; every create must arrive
// exactly once, with no overflow, under the default configuration
// (retention 10,000, debounce at its 50 ms floor).
func BenchmarkWatchBurst(b *testing.B) {
	const files = 10000
	e := NewEngine(Config{})
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	ctx := context.Background()
	var events, elapsed float64
	for b.Loop() {
		dir, _ := filepath.EvalSymlinks(b.TempDir())
		debounce := uint64(MinDebounceMS)
		w, err := e.Create(ctx, CreateWatchRequest{Path: dir, Debounce: &debounce})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		werr := make(chan error, 1)
		go func() {
			for i := range files {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), []byte("x"), 0o644); err != nil {
					werr <- err
					return
				}
			}
			werr <- nil
		}()
		seen := make(map[string]int, files)
		var cursor uint64
		limit, timeout := uint64(MaxPollLimit), uint64(1)
		deadline := time.Now().Add(2 * time.Minute)
		for len(seen) < files && time.Now().Before(deadline) {
			res, err := e.Poll(ctx, w.WatcherID, PollWatchRequest{Cursor: &cursor, Limit: &limit, Timeout: &timeout})
			if err != nil {
				b.Fatal(err)
			}
			if res.Overflow {
				b.Fatalf("overflow after %d creates", len(seen))
			}
			for _, ev := range res.Events {
				if ev.Type == TypeCreate {
					if seen[ev.Path]++; seen[ev.Path] > 1 {
						b.Fatalf("create %s twice", ev.Path)
					}
				}
			}
			events += float64(len(res.Events))
			cursor = res.Cursor
		}
		elapsed += time.Since(start).Seconds()
		if err := <-werr; err != nil {
			b.Fatal(err)
		}
		if len(seen) != files {
			b.Fatalf("%d of %d creates arrived", len(seen), files)
		}
		if _, err := e.Stop(w.WatcherID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(events/elapsed, "events/s")
	b.ReportMetric(float64(files), "creates/op")
}
