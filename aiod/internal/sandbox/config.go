package sandbox

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
)

// Isolation modes (aiod --isolation, AIO_ISOLATION).
const (
	// None starts processes on the host as the daemon always did.
	None = "none"
	// Namespaces starts every process inside the one sandbox.
	Namespaces = "namespaces"
)

// Network modes (aiod --network, AIO_NETWORK).
const (
	// NetworkHost shares the host's network stack.
	NetworkHost = "host"
	// NetworkNone gives the sandbox only a loopback interface of its own.
	NetworkNone = "none"
	// NetworkEgress is a network namespace of the sandbox's own that
	// [Config.Attach] gives a way out (a pool's egress link); not an
	// aiod flag.
	NetworkEgress = "egress"
)

// Defaults of the limits in force when a flag leaves them unset.
const (
	DefaultMemory = 2 << 30 // bytes
	DefaultPids   = 1024
	DefaultCPUs   = 1.5
	DefaultUser   = "nobody"
)

// Config says what the sandbox contains and what it may use.
type Config struct {
	// Workspace is mounted read-write at its own path; the only host
	// directory the sandbox can write. It is resolved once (links
	// followed) and refused when the path or the directory it leads to
	// is the root, a home or a system directory (workspace_linux.go).
	Workspace string
	// User is the host account sandbox processes run as when the daemon
	// is root (default "nobody"); the workspace is made writable for it.
	// It is looked up in the host's account database; UID replaces it.
	User string
	// UID and GID, when UID is set, are the ids sandbox processes and
	// Do threads run as, with no lookup on the host: a pool gives each
	// sandbox ids of its own, which need no line in the host's
	// /etc/passwd. Both must be above 0 (root and root's group are
	// refused). Inside the sandbox the account is named UserName
	// (default "sandbox"), with the workspace as its home: init binds
	// a copy of the host's /etc/passwd and /etc/group with that one
	// line added over the view's (whoami, id -un and ls -l show the
	// name). An unprivileged daemon (ReexecUnprivileged) has only its
	// caller's id to give and ignores them.
	UID, GID int
	// UserName names the UID account inside the sandbox.
	UserName string
	// Name, when set, names the sandbox's cgroups
	// aiod-sandbox-<daemon pid>-<Name> instead of a sequence number, so
	// a pool can tell its sandboxes' groups apart. Letters, digits,
	// '.', '_' and '-', at most 64; two live sandboxes of one daemon
	// may not share it.
	Name string
	// Network is NetworkHost (default), NetworkNone or NetworkEgress.
	Network string
	// Attach, required with NetworkEgress, gives the network namespace
	// of each new init (its host pid) its way out: it is called once
	// init's namespaces exist and before anything runs in them, for the
	// first init and for one started again after an init died. An error
	// fails that start.
	Attach func(pid int) error
	// Nameserver, when valid, is the one nameserver of the view's
	// /etc/resolv.conf (with NetworkEgress, the link's resolver).
	Nameserver netip.Addr
	// Memory (bytes), Pids and CPUs bound the sandbox as a whole; zero
	// means the default, a negative value no limit.
	Memory int64
	Pids   int
	CPUs   float64
	// Hostname is the sandbox's host name (default "sandbox").
	Hostname string
	// KeepOwner forbids giving the workspace to the sandbox account
	// (aiod doctor changes nothing).
	KeepOwner bool
	// System, when set, makes the sandbox a whole machine
	// (system_linux.go): root inside a user namespace of its own, its
	// system on layers.
	System *System
}

// System is what makes a sandbox a whole machine: a user namespace of
// its own whose root is a range of host ids no other sandbox holds, and
// a system on layers: /usr, /etc, /opt, /var's package state and the
// rest of its root are overlays whose lower layers are the host's
// (idmapped, read-only, with what other accounts of the host cannot read
// hidden by the mask) and whose upper layer is the sandbox's own.
type System struct {
	// IDs is the first of the 65536 host uids and gids the namespace
	// maps from 0: root inside is IDs on the host. Config.UID and GID
	// must be IDs (file operations of the daemon act as root inside).
	IDs int
	// Upper is the host directory of the sandbox's own layer: every
	// write to its system lands there, stored with the ids as they are
	// inside shifted by LayerIDs (root's 0 is LayerIDs on disk). Made
	// if missing.
	Upper string
	// Mask is the directory BuildMask made: the layer above the host's
	// that hides what other accounts of the host cannot read, and the
	// skeleton of the root.
	Mask string
}

// SystemIDs is how many ids a whole machine's namespace maps.
const SystemIDs = 1 << 16

// LayerIDs is the first of the ids a whole machine's own files (its
// upper layer, its workspace) are stored with: inside id k is LayerIDs+k
// on disk, whatever the machine's range, so a layer is another
// machine's as it is (a snapshot, a template). They are not the host's
// own ids (k): a set-user-id program or a file capability that root
// inside makes is root's inside only, never the host's root's, should
// the file ever reach the host's view (a kept workspace, a copy). Above
// every range a pool gives (plain sandboxes' from --uid-base, below
// 2000000000; machines' from 2000000000 to 2^31).
const LayerIDs = 3_000_000_000

// ownNet reports whether the sandbox has a network namespace of its own.
func (c Config) ownNet() bool { return c.Network == NetworkNone || c.Network == NetworkEgress }

// checkNetwork reports whether c's network fields go together.
func (c Config) checkNetwork() error {
	if c.Network == NetworkEgress {
		if c.Attach == nil {
			return errors.New("sandbox: network egress needs Config.Attach")
		}
		return nil
	}
	return CheckNetwork(c.Network)
}

// CheckMode reports whether s names an isolation mode.
func CheckMode(s string) error {
	if s == None || s == Namespaces {
		return nil
	}
	return fmt.Errorf("isolation must be none or namespaces, not %q", s)
}

// CheckNetwork reports whether s names a network mode.
func CheckNetwork(s string) error {
	if s == NetworkHost || s == NetworkNone {
		return nil
	}
	return fmt.Errorf("network must be host or none, not %q", s)
}

// ParseSize reads a size such as "2GiB", "512MiB", "64KiB" or a plain
// number of bytes. Units are binary (KiB, MiB, GiB, TiB; K, M, G, T and
// KB, MB, GB, TB are read as the same binary units); the result is at
// least one byte and fits an int64.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty size")
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	var mult float64
	switch unit {
	case "", "b":
		mult = 1
	case "k", "kb", "kib":
		mult = 1 << 10
	case "m", "mb", "mib":
		mult = 1 << 20
	case "g", "gb", "gib":
		mult = 1 << 30
	case "t", "tb", "tib":
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("size %q: unknown unit (use KiB, MiB or GiB)", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("size %q is not a number with a unit such as 2GiB", s)
	}
	v := f * mult
	if v < 1 || v >= math.MaxInt64 || math.IsNaN(v) {
		return 0, fmt.Errorf("size %q is out of range", s)
	}
	return int64(v), nil
}

// FormatSize writes n in the largest binary unit that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		s string
		v int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.v && n%u.v == 0 {
			return strconv.FormatInt(n/u.v, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// DefaultUserName names a UID account inside the sandbox.
const DefaultUserName = "sandbox"

// checkAccount reports whether c's account and name fields are usable.
func (c Config) checkAccount() error {
	if m := c.System; m != nil {
		if m.IDs < 1 || m.IDs > math.MaxUint32-SystemIDs || c.UID != m.IDs || c.GID != m.IDs {
			return fmt.Errorf("sandbox: a machine's ids %d must be above 0 and be its account's (uid %d, gid %d)", m.IDs, c.UID, c.GID)
		}
		if m.Upper == "" || m.Mask == "" {
			return errors.New("sandbox: a machine needs its upper layer and the mask")
		}
	}
	if c.UID != 0 || c.GID != 0 {
		if c.UID <= 0 || c.GID <= 0 || c.UID >= math.MaxUint32 || c.GID >= math.MaxUint32 {
			return fmt.Errorf("sandbox: account ids %d:%d: both must be above 0 (root is refused) and below 2^32-1", c.UID, c.GID)
		}
		if !validName(c.UserName, 32) || c.UserName[0] == '-' || c.UserName[0] == '.' {
			return fmt.Errorf("sandbox: account name %q: use letters, digits, '.', '_' or '-' (at most 32)", c.UserName)
		}
	}
	if c.Name != "" && (!validName(c.Name, 64) || c.Name == "." || c.Name == "..") {
		return fmt.Errorf("sandbox: name %q: use letters, digits, '.', '_' or '-' (at most 64)", c.Name)
	}
	return nil
}

// validName reports whether s is 1 to max letters, digits, '.', '_' or
// '-': safe as a file name and as a field of /etc/passwd.
func validName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// withDefaults fills the zero fields of c.
func (c Config) withDefaults() Config {
	if c.User == "" {
		c.User = DefaultUser
	}
	if c.UID != 0 && c.UserName == "" {
		c.UserName = DefaultUserName
	}
	if c.Network == "" {
		c.Network = NetworkHost
	}
	if c.Memory == 0 {
		c.Memory = DefaultMemory
	}
	if c.Pids == 0 {
		c.Pids = DefaultPids
	}
	if c.CPUs == 0 {
		c.CPUs = DefaultCPUs
	}
	if c.Hostname == "" {
		c.Hostname = "sandbox"
	}
	return c
}
