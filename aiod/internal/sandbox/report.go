package sandbox

// Report is the isolation in force, as /v1/capabilities and aiod doctor
// show it.
type Report struct {
	// Isolation is None or Namespaces.
	Isolation string `json:"isolation"`
	// Network is NetworkHost, NetworkNone or NetworkEgress (namespaces
	// only).
	Network string `json:"network,omitempty"`
	// User and UID are the host account sandbox processes run as.
	User string `json:"user,omitempty"`
	UID  int    `json:"uid,omitempty"`
	// Namespaces lists the namespaces the sandbox has of its own.
	Namespaces []string `json:"namespaces,omitempty"`
	// Limits says what enforces Memory, Pids and CPUs: "cgroup v2",
	// "cgroup v1" or "rlimit" (per process; CPUs not enforced).
	Limits string  `json:"limits,omitempty"`
	Memory string  `json:"memory,omitempty"`
	Pids   int     `json:"pids,omitempty"`
	CPUs   float64 `json:"cpus,omitempty"`
	// Workspace says how the sandbox account writes a workspace it
	// does not own, when it is idmapped (empty otherwise).
	Workspace string `json:"workspace,omitempty"`
	// Warnings name what the machine did not allow.
	Warnings []string `json:"warnings,omitempty"`
}

// Machine is what this machine allows, whatever the isolation in force.
type Machine struct {
	Root           bool   `json:"root"`            // the daemon runs as root on the host
	UserNamespaces bool   `json:"user_namespaces"` // unprivileged user namespaces can be created
	Cgroup         string `json:"cgroup"`          // "v2", "v1" or "none"
	Openat2        bool   `json:"openat2"`         // the kernel has openat2 (RESOLVE_IN_ROOT)
	Landlock       int    `json:"landlock"`        // the kernel's Landlock ABI (6 scopes abstract Unix sockets), 0 without
}
