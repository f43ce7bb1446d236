package main

import (
	"fmt"
	"io"
	"time"
)

type targetResult struct {
	name   string
	levels []levelResult
	idle   []idleResult
}

type report struct {
	dur      time.Duration
	cpus     int
	rounds   int
	baseline levelResult
	targets  []targetResult
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func (r report) print(w io.Writer) {
	fmt.Fprintf(w, "### Relay load (%s per level, %d CPUs, medians of %d rounds)\n\n", r.dur, r.cpus, r.rounds)
	fmt.Fprintf(w, "Baseline, two loopback WebSocket hops (Go forwarder + echo peer): p50 %s, p99 %s, %.0f round trips/s, forwarder CPU %.1f µs per round trip\n\n",
		us(r.baseline.p50), us(r.baseline.p99), float64(r.baseline.calls)/r.baseline.seconds, float64(r.baseline.cpuPerCall)/float64(time.Microsecond))
	fmt.Fprintln(w, "| server | agents | calls/s | p50 | p99 | server CPU per call | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, t := range r.targets {
		for _, l := range t.levels {
			fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s | %.1f µs | %d |\n", t.name, l.agents, float64(l.calls)/l.seconds,
				us(l.p50), us(l.p99), float64(l.cpuPerCall)/float64(time.Microsecond), l.clientError)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| server | idle joined connections | RSS before | RSS after | per connection | connect time |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, t := range r.targets {
		for _, i := range t.idle {
			fmt.Fprintf(w, "| %s | %d | %d KiB | %d KiB | %.1f KiB | %.1f s |\n", t.name, i.conns, i.baseKiB, i.kib, i.perConnKiB, i.connectSeconds)
		}
	}
	var ours, ref *targetResult
	for i := range r.targets {
		switch r.targets[i].name {
		case "ours":
			ours = &r.targets[i]
		case "node":
			ref = &r.targets[i]
		}
	}
	fmt.Fprintln(w)
	if ours != nil && len(ours.levels) > 0 {
		fmt.Fprintf(w, "- ours p50 at %d agent(s) / baseline p50: %s (target ≤ 1.30×)\n", ours.levels[0].agents,
			ratio(float64(ours.levels[0].p50), float64(r.baseline.p50)))
	}
	if ours == nil || ref == nil {
		return
	}
	for i, l := range ours.levels {
		if i >= len(ref.levels) {
			break
		}
		rl := ref.levels[i]
		fmt.Fprintf(w, "- %d agents: CPU per call ours/node %s (target ≤ 0.50×), calls/s ours/node %s (target ≥ 1×), p99 ours/node %s\n",
			l.agents, ratio(float64(l.cpuPerCall), float64(rl.cpuPerCall)),
			ratio(float64(l.calls)/l.seconds, float64(rl.calls)/rl.seconds), ratio(float64(l.p99), float64(rl.p99)))
	}
	for i, id := range ours.idle {
		if i >= len(ref.idle) {
			break
		}
		fmt.Fprintf(w, "- %d idle connections: RSS per connection ours/node %s (target ≤ 0.50×)\n", id.conns,
			ratio(id.perConnKiB, ref.idle[i].perConnKiB))
	}
}
