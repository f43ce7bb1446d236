package code

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// BenchmarkPrint1 runs print(1) on a warm kernel through the engine and
// reports the median latency.
func BenchmarkPrint1(b *testing.B) {
	benchPrint1(b, Config{Workspace: b.TempDir()})
}

// BenchmarkSandboxPrint1 runs print(1) on three warm kernels in turn,
// one on the host, one in a sandbox sharing the host's network and one
// in a sandbox with a network of its own (both on unix sockets), and
// reports each one's median and the sandboxes' ratio to the host, for
// bench/RESULTS.md. Taking turns in one loop (each first in turn)
// keeps the machine's drift and the order out of the comparison. It needs root.
func BenchmarkSandboxPrint1(b *testing.B) {
	sbHost, wsHost := newSandbox(b, sandbox.NetworkHost)
	sbNone, wsNone := newSandbox(b, sandbox.NetworkNone)
	runs := []struct {
		name string
		cfg  Config
	}{
		{"host", Config{Workspace: b.TempDir(), Python: "/usr/bin/python3"}},
		{"sandbox", Config{Workspace: wsHost, Python: "/usr/bin/python3", Sandbox: sbHost}},
		{"sandbox-netnone", Config{Workspace: wsNone, Python: "/usr/bin/python3", Sandbox: sbNone}},
	}
	ctx := context.Background()
	req := Request{Language: Python, Code: "print(1)", SessionID: "bench"}
	engines := make([]*Engine, len(runs))
	for i, r := range runs {
		engines[i] = NewEngine(r.cfg)
		defer engines[i].Close(ctx)
		if res, err := engines[i].Execute(ctx, req); err != nil || res.Stdout != "1\n" {
			b.Fatalf("%s: %+v %v", r.name, res, err)
		}
	}
	lat := make([][]time.Duration, len(runs))
	turn := 0
	for b.Loop() {
		turn++
		for j := range engines {
			i := (j + turn) % len(engines) // each goes first in turn
			e := engines[i]
			start := time.Now()
			if res, err := e.Execute(ctx, req); err != nil || res.Stdout != "1\n" {
				b.Fatalf("%s: %+v %v", runs[i].name, res, err)
			}
			lat[i] = append(lat[i], time.Since(start))
		}
	}
	p50 := make([]float64, len(runs))
	for i := range runs {
		slices.Sort(lat[i])
		p50[i] = float64(lat[i][len(lat[i])/2].Microseconds()) / 1000
		b.ReportMetric(p50[i], runs[i].name+"-p50-ms")
	}
	b.ReportMetric(p50[1]/p50[0], "sandbox/host")
	b.ReportMetric(p50[2]/p50[0], "netnone/host")
}

// benchPrint1 measures print(1) on a warm kernel of an engine with cfg.
func benchPrint1(b *testing.B, cfg Config) {
	e := NewEngine(cfg)
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
