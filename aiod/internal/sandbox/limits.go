package sandbox

import (
	"fmt"
	"math"
)

// The bounds of a sandbox's limits: the one rule aiod's flags and
// variables and the pool's create requests apply.
const (
	// MinMemory is the least memory a sandbox may be given: what a
	// shell and a small command need.
	MinMemory = 16 << 20
	// MinPids and MaxPids bound the processes and threads of a sandbox.
	MinPids = 8
	MaxPids = 1 << 22
	// MinCPUs and MaxCPUs bound its CPU time, in CPUs.
	MinCPUs = 0.01
	MaxCPUs = 4096
)

// CheckMemory reports whether n bytes is a memory limit a sandbox can
// run with.
func CheckMemory(n int64) error {
	if n < MinMemory {
		return fmt.Errorf("%s is below the 16MiB a shell needs", FormatSize(n))
	}
	return nil
}

// CheckPids reports whether n is a process limit in range.
func CheckPids(n int) error {
	if n < MinPids || n > MaxPids {
		return fmt.Errorf("must be a number of processes from %d to %d, got %d", MinPids, MaxPids, n)
	}
	return nil
}

// CheckCPUs reports whether f is a CPU limit in range.
func CheckCPUs(f float64) error {
	if math.IsNaN(f) || f < MinCPUs || f > MaxCPUs {
		return fmt.Errorf("must be a number of CPUs from %g to %d, got %g", MinCPUs, MaxCPUs, f)
	}
	return nil
}
