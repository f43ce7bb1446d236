package sandbox

// Usage is what a sandbox uses, read from its cgroups ([Sandbox.Usage]).
// A limit of 0 means none.
type Usage struct {
	// CPUUsageNs is the CPU time the sandbox's processes have used, in
	// nanoseconds (v1 cpuacct.usage, v2 cpu.stat usage_usec). On v1 it
	// includes the daemon's work forking the sandbox's processes (the
	// spawner thread is in the group; see cgroups).
	CPUUsageNs uint64
	// MemoryBytes is the memory charged to the sandbox (its page cache
	// and its /tmp included), MemoryLimitBytes its limit.
	MemoryBytes, MemoryLimitBytes uint64
	// Pids is how many tasks (threads) the sandbox runs, PidsLimit the
	// most it may.
	Pids, PidsLimit uint64
}
