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
