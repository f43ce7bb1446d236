// Package lat measures latency for the benchmarks: it runs a call many
// times after a warm-up and reports percentiles.
package lat

import (
	"fmt"
	"slices"
	"time"
)

// Measure runs f n/10 times to warm up, then n times, and returns p50 and
// p99. It stops at the first error.
func Measure(n int, f func() error) (p50, p99 time.Duration, err error) {
	for i := 0; i < n/10; i++ {
		if err := f(); err != nil {
			return 0, 0, err
		}
	}
	d := make([]time.Duration, n)
	for i := range d {
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, 0, err
		}
		d[i] = time.Since(t0)
	}
	slices.Sort(d)
	return d[n/2], d[n*99/100], nil
}

// US formats d in whole microseconds.
func US(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

// Samples are the sorted latencies of one path.
type Samples []time.Duration

// P50 is the median.
func (s Samples) P50() time.Duration { return s[len(s)/2] }

// P99 is the 99th percentile.
func (s Samples) P99() time.Duration { return s[len(s)*99/100] }

// Interleave runs each f n times, in turns of block calls each (after a
// warm-up of n/10 calls each), so slow drift of the machine falls on
// every path alike. It returns each path's sorted latencies and stops at
// the first error.
func Interleave(n, block int, fs ...func() error) ([]Samples, error) {
	out := make([]Samples, len(fs))
	for i, f := range fs {
		for range n / 10 {
			if err := f(); err != nil {
				return nil, err
			}
		}
		out[i] = make(Samples, 0, n)
	}
	for len(out[0]) < n {
		for i, f := range fs {
			for range min(block, n-len(out[i])) {
				t0 := time.Now()
				if err := f(); err != nil {
					return nil, err
				}
				out[i] = append(out[i], time.Since(t0))
			}
		}
	}
	for _, s := range out {
		slices.Sort(s)
	}
	return out, nil
}
