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
	baseline []levelResult // the raw forwarder, one per agents level
	targets  []targetResult
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// rawAt is the raw forwarder's result at the given agents level.
func (r report) rawAt(agents int) (levelResult, bool) {
	for _, b := range r.baseline {
		if b.agents == agents {
			return b, true
		}
	}
	return levelResult{}, false
}

func (r report) print(w io.Writer) {
	fmt.Fprintf(w, "### Relay load (%s per level, %d CPUs, medians of %d rounds)\n\n", r.dur, r.cpus, r.rounds)
	fmt.Fprintln(w, "Raw forwarder: the relay's topology with nothing but WebSocket, two loopback hops each way (a Go forwarder between N clients and N echo peers); its CPU per round trip is the floor.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| server | agents | calls/s | p50 | p99 | server CPU per call | raw forwarder CPU per call | CPU ×raw | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	row := func(name string, l levelResult) {
		raw, ok := r.rawAt(l.agents)
		rawCPU, x := "n/a", "n/a"
		if ok {
			rawCPU = fmt.Sprintf("%.1f µs", float64(raw.cpuPerCall)/float64(time.Microsecond))
			x = ratio(float64(l.cpuPerCall), float64(raw.cpuPerCall))
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s | %.1f µs | %s | %s | %d |\n", name, l.agents, float64(l.calls)/l.seconds,
			us(l.p50), us(l.p99), float64(l.cpuPerCall)/float64(time.Microsecond), rawCPU, x, l.clientError)
	}
	for _, b := range r.baseline {
		row("raw forwarder", b)
	}
	for _, t := range r.targets {
		for _, l := range t.levels {
			row(t.name, l)
		}
	}
	printIdle(w, r.targets)
	r.printAB(w)
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
		if raw, ok := r.rawAt(ours.levels[0].agents); ok {
			fmt.Fprintf(w, "- ours p50 at %d agent(s) / raw forwarder p50: %s (target ≤ 1.30×)\n", ours.levels[0].agents,
				ratio(float64(ours.levels[0].p50), float64(raw.p50)))
		}
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

// printAB compares every target of ours with the first one (the "before"
// binary of an A/B run, say ours@REV) at each agents level.
func (r report) printAB(w io.Writer) {
	var first *targetResult
	for i := range r.targets {
		if r.targets[i].name != "node" {
			first = &r.targets[i]
			break
		}
	}
	if first == nil {
		return
	}
	header := false
	for _, t := range r.targets {
		if t.name == "node" || t.name == first.name {
			continue
		}
		if !header {
			fmt.Fprintln(w)
			fmt.Fprintf(w, "A/B against %s (same run, medians):\n\n", first.name)
			fmt.Fprintln(w, "| server | agents | calls/s ratio | CPU per call ratio | p50 ratio | p99 ratio |")
			fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
			header = true
		}
		for i, l := range t.levels {
			if i >= len(first.levels) {
				break
			}
			b := first.levels[i]
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", t.name, l.agents,
				ratio(float64(l.calls)/l.seconds, float64(b.calls)/b.seconds), ratio(float64(l.cpuPerCall), float64(b.cpuPerCall)),
				ratio(float64(l.p50), float64(b.p50)), ratio(float64(l.p99), float64(b.p99)))
		}
	}
}

// printIdle writes the idle-connections table.
func printIdle(w io.Writer, targets []targetResult) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| server | idle joined connections | RSS before | RSS after | per connection | connect time |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, t := range targets {
		for _, i := range t.idle {
			fmt.Fprintf(w, "| %s | %d | %d KiB | %d KiB | %.1f KiB | %.1f s |\n", t.name, i.conns, i.baseKiB, i.kib, i.perConnKiB, i.connectSeconds)
		}
	}
}
