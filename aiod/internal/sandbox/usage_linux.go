package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Usage reads what the sandbox uses from its cgroups. It works paused
// or running and changes nothing.
func (s *Sandbox) Usage() (Usage, error) {
	if s == nil || s.cg == nil {
		return Usage{}, ErrNoCgroups
	}
	return s.cg.usage()
}

// usage reads c's counters. On v1 the pids group's count includes the
// daemon's spawner threads (c.joined), which are taken off.
func (c *cgroups) usage() (Usage, error) {
	var u Usage
	var err error
	num := func(dir, file string) uint64 {
		if err != nil {
			return 0
		}
		var b []byte
		if b, err = os.ReadFile(filepath.Join(dir, file)); err != nil {
			err = fmt.Errorf("sandbox: usage: %w", err)
			return 0
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0
		}
		var n uint64
		if n, err = strconv.ParseUint(v, 10, 64); err != nil {
			err = fmt.Errorf("sandbox: usage: %s: %w", file, err)
		}
		return n
	}
	if c.v2 != "" {
		u.MemoryBytes = num(c.v2, "memory.current")
		u.MemoryLimitBytes = num(c.v2, "memory.max")
		u.Pids = num(c.v2, "pids.current")
		u.PidsLimit = num(c.v2, "pids.max")
		if err != nil {
			return Usage{}, err
		}
		b, rerr := os.ReadFile(filepath.Join(c.v2, "cpu.stat"))
		if rerr != nil {
			return Usage{}, fmt.Errorf("sandbox: usage: %w", rerr)
		}
		u.CPUUsageNs = statField(string(b), "usage_usec") * 1000
		return u, nil
	}
	u.MemoryBytes = num(c.v1["memory"], "memory.usage_in_bytes")
	u.MemoryLimitBytes = num(c.v1["memory"], "memory.limit_in_bytes")
	u.Pids = num(c.v1["pids"], "pids.current")
	u.PidsLimit = num(c.v1["pids"], "pids.max")
	if d, ok := c.v1["cpuacct"]; ok {
		u.CPUUsageNs = num(d, "cpuacct.usage")
	}
	if err != nil {
		return Usage{}, err
	}
	// v1 reports "no limit" as the largest page-aligned value.
	if u.MemoryLimitBytes >= 1<<62 {
		u.MemoryLimitBytes = 0
	}
	if j := uint64(max(c.joined.Load(), 0)); u.Pids >= j {
		u.Pids -= j
	}
	return u, nil
}

// statField is the value of key in a flat "key value" file (cpu.stat).
func statField(text, key string) uint64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
