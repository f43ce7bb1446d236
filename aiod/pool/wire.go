package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// State is where a sandbox is in its life.
type State string

// The states a sandbox passes through.
const (
	// Starting: created, its init and planes not yet ready.
	Starting State = "starting"
	// Running: serving its API.
	Running State = "running"
	// Paused: every process frozen (cgroup freezer); a request to its API
	// or a tool call through its office resumes it.
	Paused State = "paused"
	// Stopped: ended; its processes are gone. Shown only in the answer to
	// the request that ended it.
	Stopped State = "stopped"
)

// What happens to a sandbox when its deadline or idle timeout passes
// (on_timeout).
const (
	OnTimeoutKill  = "kill"
	OnTimeoutPause = "pause"
)

// Network modes of a sandbox (network).
const (
	// NetworkNone is a network namespace of the sandbox's own with only
	// its loopback: the default.
	NetworkNone = "none"
	// NetworkHost shares the host's network stack; only where the pool
	// was started with --allow-host-network.
	NetworkHost = "host"
	// NetworkEgress is a network namespace of the sandbox's own with a
	// routed, filtered way out (the create's egress rules); only where
	// the pool was started with --egress.
	NetworkEgress = "egress"
)

// Egress says where a sandbox of network "egress" may go. Each entry is
// an IPv4 address ("93.184.216.34"), an IPv4 CIDR ("10.0.0.0/8"), a
// host name ("pypi.org") or a pattern of the names below one
// ("*.pythonhosted.org"); a name rule holds through the sandbox's own
// resolver, which its /etc/resolv.conf names. Deny wins over Allow; with
// no Allow, everything not denied is allowed. Whatever the rules say, a
// sandbox never reaches another sandbox, the host (its loopback, its
// addresses, the pool's API) nor link-local addresses (unless allowed).
type Egress struct {
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
}

// Sandbox is the sandbox object every lifecycle route answers with.
type Sandbox struct {
	ID       string `json:"id"`
	State    State  `json:"state"`
	Template string `json:"template"`
	// Office is the A2C office the sandbox joined as a Computer named
	// Computer; both are empty (null on the wire) when it joined none.
	Office   string `json:"office"`
	Computer string `json:"computer"`
	// CreatedAt is when the create was answered; ExpiresAt the deadline
	// (nil: none, null on the wire).
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	OnTimeout string     `json:"on_timeout"`
	// IdleTimeoutS is the idle timeout in seconds (0: none).
	IdleTimeoutS int    `json:"idle_timeout_s"`
	Limits       Limits `json:"limits"`
	Network      string `json:"network"`
	// Egress is the way-out rules of a sandbox of network "egress"
	// (absent for the others).
	Egress *Egress `json:"egress,omitempty"`
	// Machine is true for a whole machine (absent for the others).
	Machine  bool              `json:"machine,omitempty"`
	Metadata map[string]string `json:"metadata"`
	// Parent is the snapshot the sandbox was made from (a fork, or a
	// create with from_snapshot), Ancestors that one and the snapshots it
	// descends from, nearest first; both absent for a sandbox made from
	// no snapshot.
	Parent    *string  `json:"parent,omitempty"`
	Ancestors []string `json:"ancestors,omitempty"`
	// APIURL is the base URL of the sandbox's own aiod API
	// (http://HOST:PORT/sandboxes/{id}); MCPURL its /mcp.
	APIURL string `json:"api_url"`
	MCPURL string `json:"mcp_url"`
}

// MarshalJSON writes an empty Office or Computer as null.
func (s Sandbox) MarshalJSON() ([]byte, error) {
	type plain Sandbox
	return json.Marshal(struct {
		plain
		Office   *string `json:"office"`
		Computer *string `json:"computer"`
	}{plain(s), nullable(s.Office), nullable(s.Computer)})
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Limits bound one sandbox as a whole. On the wire Memory is a size in
// aiod's flag syntax ("1GiB", "512MiB", or a number of bytes).
type Limits struct {
	Memory Size    `json:"memory"`
	Pids   int     `json:"pids"`
	CPUs   float64 `json:"cpus"`
}

// Size is a number of bytes, written as a size string ("1GiB") and read
// from one or from a plain number.
type Size int64

// CreateRequest is the body of POST /v2/sandboxes; every field is
// optional. Unknown fields are refused (400 naming the field).
type CreateRequest struct {
	// Template names the workspace's starting contents (default "base":
	// empty).
	Template string `json:"template,omitempty"`
	// Office, when set, makes the sandbox join that office as a Computer
	// named Name (default "sandbox") on the pool's hub.
	Office string `json:"office,omitempty"`
	Name   string `json:"name,omitempty"`
	// TimeoutS is the lifetime in seconds (nil: the default 300; 0: no
	// deadline); OnTimeout what happens then (kill, the default, or
	// pause).
	TimeoutS  *int   `json:"timeout_s,omitempty"`
	OnTimeout string `json:"on_timeout,omitempty"`
	// IdleTimeoutS applies OnTimeout after that many seconds without an
	// API request, tool call or terminal input (0: never).
	IdleTimeoutS int `json:"idle_timeout_s,omitempty"`
	// Env is added to the environment of every process the sandbox runs.
	Env map[string]string `json:"env,omitempty"`
	// Limits overrides the pool's per-sandbox limits; a zero field keeps
	// the pool's default.
	Limits *Limits `json:"limits,omitempty"`
	// Network is "none" (default), "host" or "egress".
	Network string `json:"network,omitempty"`
	// Egress is the rules of network "egress" (nil: no rule, everything
	// but the walls is reachable).
	Egress *Egress `json:"egress,omitempty"`
	// Metadata is echoed back, and filters the list.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Machine asks for a whole machine (true; a pool started with
	// --machine): root inside, a writable system on layers, snapshots
	// and forks; or for a plain sandbox (false). Nil takes the pool's
	// default: a plain sandbox, or a machine with --machine=all.
	Machine *bool `json:"machine,omitempty"`
	// FromSnapshot starts the sandbox from a snapshot (a whole machine
	// too): its files, installed packages and workspace, not its
	// processes.
	FromSnapshot string `json:"from_snapshot,omitempty"`
}

// Snapshot is a snapshot of a whole machine: its system and workspace
// as they were at CreatedAt (the sandbox frozen for the cut).
type Snapshot struct {
	ID string `json:"snapshot_id"`
	// SandboxID is the sandbox it was taken of; Parent the snapshot that
	// sandbox was made from (null: none).
	SandboxID string    `json:"sandbox_id"`
	Parent    *string   `json:"parent"`
	CreatedAt time.Time `json:"created_at"`
	// SizeBytes is what the sandbox's own layer held: the bytes of its
	// files (4 KiB a directory), what it wrote over its base.
	SizeBytes int64 `json:"size_bytes"`
}

// SnapshotList is the answer of GET /v2/snapshots.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}

// TimeoutRequest is the body of POST /v2/sandboxes/{id}/timeout, and the
// optional body of .../resume.
type TimeoutRequest struct {
	TimeoutS *int `json:"timeout_s,omitempty"`
}

// List is the answer of GET /v2/sandboxes.
type List struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// Metrics is the answer of GET /v2/sandboxes/{id}/metrics: usage read
// from the sandbox's cgroups and its workspace.
type Metrics struct {
	CPUUsageNs       uint64 `json:"cpu_usage_ns"`
	MemoryBytes      uint64 `json:"memory_bytes"`
	MemoryLimitBytes uint64 `json:"memory_limit_bytes"`
	Pids             uint64 `json:"pids"`
	PidsLimit        uint64 `json:"pids_limit"`
	DiskBytes        uint64 `json:"disk_bytes"`
	// Since is when the counters started (the sandbox's start).
	Since time.Time `json:"since"`
}

// ErrorBody is every error answer of the pool's own routes.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the error itself: Code is the HTTP status.
type ErrorDetail struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Error is an error answer of the pool, as the client returns it.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return "pool: " + e.Message }

var null = []byte("null")

func isNull(b []byte) bool { return bytes.Equal(bytes.TrimSpace(b), null) }

// MarshalJSON writes s in the largest binary unit that divides it
// ("1GiB"), or 0 when unset.
func (s Size) MarshalJSON() ([]byte, error) {
	if s <= 0 {
		return []byte("0"), nil
	}
	return json.Marshal(sandbox.FormatSize(int64(s)))
}

// UnmarshalJSON reads a size string ("512MiB") or a number of bytes.
func (s *Size) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		*s = 0
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		var n float64
		if json.Unmarshal(b, &n) != nil || n < 0 || n != float64(int64(n)) {
			return errors.New("must be a size such as \"1GiB\" or a whole number of bytes")
		}
		*s = Size(n)
		return nil
	}
	n, err := sandbox.ParseSize(str)
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}
