package code

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkPrint1 runs print(1) on a warm kernel through the engine and
// reports the median latency.
func BenchmarkPrint1(b *testing.B) {
	e := NewEngine(Config{Workspace: b.TempDir()})
	defer e.Close(context.Background())
	req := Request{Language: Python, Code: "print(1)", SessionID: "bench"}
	if r, err := e.Execute(context.Background(), req); err != nil || r.Stdout != "1\n" {
		b.Fatalf("%+v %v", r, err)
	}
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		if r, err := e.Execute(context.Background(), req); err != nil || r.Stdout != "1\n" {
			b.Fatalf("%+v %v", r, err)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}
