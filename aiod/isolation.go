package aiod

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// Isolation is how a daemon contains what it runs (package
// aiod/internal/sandbox). The zero value is isolation none, as the
// published daemon (which trusts its container).
type Isolation struct {
	// Mode is "none" (default) or "namespaces" (AIO_ISOLATION,
	// --isolation).
	Mode string
	// Network is "host" (default) or "none": only a loopback of the
	// sandbox's own (AIO_NETWORK, --network).
	Network string
	// User is the host account sandbox processes run as when the daemon
	// is root (AIO_SANDBOX_USER, --sandbox-user; default nobody).
	User string
	// Memory (bytes), Pids and CPUs bound the sandbox as a whole
	// (AIO_MEMORY, AIO_PIDS, AIO_CPUS; --memory, --pids, --cpus);
	// zero takes the defaults of package sandbox (2GiB, 1024, 1.5).
	Memory int64
	Pids   int
	CPUs   float64
	// Fallback lets a daemon on a machine that cannot isolate (not root
	// and no user namespace of its own, or a kernel that refuses new
	// namespaces: sandbox.ErrCannotIsolate) run with isolation none and a
	// warning instead of failing: a2c up's default, never an explicit
	// request. Any other reason the sandbox cannot start (a refused
	// workspace) still fails.
	Fallback bool
	// keepOwner leaves the workspace's owner alone (aiod doctor).
	keepOwner bool
}

// Variables of the isolation, read by [ConfigFromEnv].
const (
	EnvIsolation   = "AIO_ISOLATION"
	EnvNetwork     = "AIO_NETWORK"
	EnvSandboxUser = "AIO_SANDBOX_USER"
	EnvMemory      = "AIO_MEMORY"
	EnvPids        = "AIO_PIDS"
	EnvCPUs        = "AIO_CPUS"
)

// isolationFromEnv reads the isolation variables; a bad value is an
// error naming the variable.
func isolationFromEnv(getenv func(string) string) (Isolation, error) {
	var iso Isolation
	set := func(name, v string) error { return iso.set(name, v) }
	for _, name := range []string{EnvIsolation, EnvNetwork, EnvSandboxUser, EnvMemory, EnvPids, EnvCPUs} {
		if v := getenv(name); v != "" {
			if err := set(name, v); err != nil {
				return Isolation{}, err
			}
		}
	}
	return iso, nil
}

// set parses one setting, named by its variable, into iso: the one
// place a value of a flag or a variable is checked.
func (iso *Isolation) set(name, v string) error {
	fail := func(err error) error { return fmt.Errorf("%s: %w", name, err) }
	switch name {
	case EnvIsolation:
		if err := sandbox.CheckMode(v); err != nil {
			return fail(err)
		}
		iso.Mode = v
	case EnvNetwork:
		if err := sandbox.CheckNetwork(v); err != nil {
			return fail(err)
		}
		iso.Network = v
	case EnvSandboxUser:
		if strings.TrimSpace(v) == "" {
			return fail(errors.New("must name an account"))
		}
		iso.User = v
	case EnvMemory:
		n, err := sandbox.ParseSize(v)
		if err != nil {
			return fail(err)
		}
		if err := sandbox.CheckMemory(n); err != nil {
			return fail(err)
		}
		iso.Memory = n
	case EnvPids:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err == nil {
			err = sandbox.CheckPids(n)
		}
		if err != nil {
			return fail(fmt.Errorf("must be a number of processes from %d to %d, got %q", sandbox.MinPids, sandbox.MaxPids, v))
		}
		iso.Pids = n
	case EnvCPUs:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err == nil {
			err = sandbox.CheckCPUs(f)
		}
		if err != nil {
			return fail(fmt.Errorf("must be a number of CPUs from %g to %d, got %q", sandbox.MinCPUs, sandbox.MaxCPUs, v))
		}
		iso.CPUs = f
	}
	return nil
}

// IsolationFlags are the isolation flags of aiod start and a2c up.
type IsolationFlags struct {
	values map[string]*string // variable -> flag value
	flags  map[string]string  // variable -> flag name
}

// AddIsolationFlags defines --isolation, --network, --sandbox-user,
// --memory, --pids and --cpus on fs; mode is the default --isolation
// shows (what the caller applies when neither flag nor AIO_ISOLATION
// says).
func AddIsolationFlags(fs *flag.FlagSet, mode string) *IsolationFlags {
	f := &IsolationFlags{values: map[string]*string{}, flags: map[string]string{}}
	def := func(env, name, value, usage string) {
		f.values[env], f.flags[env] = fs.String(name, value, usage+" (env "+env+")"), name
	}
	def(EnvIsolation, "isolation", mode, "none, or namespaces: every process the daemon starts runs in one sandbox (own mount, PID, IPC and UTS namespaces, system directories read-only, the workspace read-write, nothing else of the host; needs root)")
	def(EnvNetwork, "network", sandbox.NetworkHost, "with --isolation namespaces: host, or none (only the sandbox's own loopback)")
	def(EnvSandboxUser, "sandbox-user", sandbox.DefaultUser, "with --isolation namespaces: the unprivileged host account sandbox processes run as")
	def(EnvMemory, "memory", sandbox.FormatSize(sandbox.DefaultMemory), "with --isolation namespaces: memory of the whole sandbox (KiB, MiB, GiB); a process over it is killed alone")
	def(EnvPids, "pids", strconv.Itoa(sandbox.DefaultPids), "with --isolation namespaces: processes and threads of the whole sandbox")
	def(EnvCPUs, "cpus", strconv.FormatFloat(sandbox.DefaultCPUs, 'f', -1, 64), "with --isolation namespaces: CPU time of the whole sandbox, in CPUs")
	return f
}

// Apply lays the flags given on the command line (set) over iso, which
// holds the environment's values.
func (f *IsolationFlags) Apply(set map[string]bool, iso *Isolation) error {
	for _, env := range []string{EnvIsolation, EnvNetwork, EnvSandboxUser, EnvMemory, EnvPids, EnvCPUs} {
		if !set[f.flags[env]] {
			continue
		}
		if err := iso.set(env, *f.values[env]); err != nil {
			return errors.New("--" + f.flags[env] + strings.TrimPrefix(err.Error(), env))
		}
	}
	return nil
}

// startSandbox starts the sandbox cfg asks for: nil for isolation none,
// or when iso.Fallback allows running without one on a machine that
// cannot isolate (logged as a warning).
func startSandbox(cfg Config, log *slog.Logger) (*sandbox.Sandbox, error) {
	iso := cfg.Isolation
	if iso.Mode != sandbox.Namespaces {
		return nil, nil
	}
	// A default user names who runs processes; in a sandbox that is the
	// sandbox account, so the two must agree.
	switch {
	case cfg.DefaultUser != "" && iso.User == "":
		iso.User = cfg.DefaultUser
	case cfg.DefaultUser != "" && iso.User != cfg.DefaultUser:
		return nil, fmt.Errorf("isolation: the default user %s and the sandbox account %s differ; under --isolation namespaces every process runs as the sandbox account", cfg.DefaultUser, iso.User)
	}
	if iso.Fallback && os.Geteuid() != 0 {
		log.Warn("isolation: neither root nor in a user namespace of its own (the machine refuses unprivileged ones), so processes run WITHOUT isolation, on the host as this account; pass --isolation none to silence this")
		return nil, nil
	}
	sb, err := sandbox.New(sandbox.Config{Workspace: cfg.Workspace, User: iso.User, Network: iso.Network,
		Memory: iso.Memory, Pids: iso.Pids, CPUs: iso.CPUs, KeepOwner: iso.keepOwner}, log)
	switch {
	case err != nil && iso.Fallback && errors.Is(err, sandbox.ErrCannotIsolate):
		// Only the machine's limits fall back; a refused workspace or a
		// missing account is the request's mistake and stops the start.
		log.Warn("isolation: the sandbox cannot start here, so processes run WITHOUT isolation; pass --isolation none to silence this", "err", err)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("isolation: %w", err)
	}
	return sb, nil
}

// isolationMode is the isolation a command line asks for, before its
// flags are parsed: the last --isolation (or -isolation, =VALUE or
// VALUE) before "--", else env (AIO_ISOLATION), else def.
func isolationMode(flags []string, env, def string) string {
	mode := def
	if env != "" {
		mode = env
	}
	for i := 0; i < len(flags); i++ {
		if flags[i] == "--" {
			break // the flags end here
		}
		f := strings.TrimLeft(flags[i], "-")
		if !strings.HasPrefix(flags[i], "-") || f == "" {
			continue
		}
		if v, isIso := strings.CutPrefix(f, "isolation="); isIso {
			mode = v
		} else if f == "isolation" && i+1 < len(flags) {
			mode = flags[i+1]
		}
	}
	return mode
}

// ReexecForIsolation gives an unprivileged daemon its sandbox: when the
// command line flags (or AIO_ISOLATION, else def) ask for isolation
// namespaces and the process is not root, it runs argv (the whole
// command line, program name first) again in a user namespace of its own
// (see sandbox.ReexecUnprivileged) and returns that run's exit code with
// ok true. Otherwise, or where the machine refuses, it does nothing.
func ReexecForIsolation(argv, flags []string, def string) (code int, ok bool) {
	if isolationMode(flags, os.Getenv(EnvIsolation), def) != sandbox.Namespaces {
		return 0, false
	}
	return sandbox.ReexecUnprivileged(argv)
}
