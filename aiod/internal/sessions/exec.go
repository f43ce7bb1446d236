package sessions

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/account"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/internal/credenv"
)

// Secrets are the daemon's variables no child process inherits: the
// project's one list of credential variables (package credenv): its API
// key, the hub's token of a daemon that joins an office (and of a2c up,
// which runs one in process), the upstream MCP servers (whose URLs may
// hold credentials), a hub cluster's Redis URL and the OTLP headers.
var Secrets = credenv.Names()

// Exec is a plane's execution context: where runs start, who they run
// as by default and the environment they inherit. It is immutable and
// safe for concurrent use.
type Exec struct {
	workspace   string
	defaultUser string
	env         []string
	sandbox     *sandbox.Sandbox // nil: runs on the host
}

// NewExec returns the context for a plane: relative directories resolve
// against workspace (the current directory when empty), a request
// naming no user runs as defaultUser (empty: the daemon's own account),
// and children inherit environ without [Secrets] and the names in hide.
func NewExec(workspace, defaultUser string, environ, hide []string) *Exec {
	if workspace == "" {
		workspace, _ = os.Getwd()
	}
	return &Exec{workspace: workspace, defaultUser: defaultUser, env: credenv.Strip(environ, hide...)}
}

// Sandboxed returns a copy of x for a daemon whose processes run in sb
// (nil: x itself). In it, directories are checked in the sandbox's view
// and every run is the sandbox account's (see [Exec.Account]).
func (x *Exec) Sandboxed(sb *sandbox.Sandbox) *Exec {
	if sb == nil {
		return x
	}
	c := *x
	c.sandbox = sb
	// The daemon's environment is the host's, and may hold any
	// credential its launcher had (a cloud token, a proxy with a
	// password): a sandbox inherits only what locates programs and sets
	// the locale and the terminal.
	c.env = SandboxEnv(x.env)
	return &c
}

// SandboxEnv keeps the variables of env a sandbox inherits: the one rule
// for every process that runs in the sandbox, the planes' commands and
// the programs aiod starts there (Chromium, Xvfb, openbox, the
// computer-use worker), which any sandboxed command can read in
// /proc/PID/environ, since they run as the same account.
func SandboxEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if sandboxEnv[k] || strings.HasPrefix(k, "LC_") {
			out = append(out, kv)
		}
	}
	return out
}

// sandboxEnv are the variables of the daemon's environment a sandbox
// inherits (besides LC_*).
var sandboxEnv = map[string]bool{"PATH": true, "LANG": true, "LANGUAGE": true, "TZ": true, "TERM": true, "COLORTERM": true, "NO_COLOR": true}

// Wrap returns what starts cmd: start itself on the host, or start run
// inside the sandbox ([sandbox.Sandbox.Wrap]). Every plane starts its
// processes through it, so no plane decides where a process runs.
func (x *Exec) Wrap(cmd *exec.Cmd, start func() error) func() error {
	return x.sandbox.Wrap(cmd, start)
}

// OwnsTerminals reports whether a terminal must be opened with OpenPTY
// (a whole machine's), not on the host's /dev/ptmx.
func (x *Exec) OwnsTerminals() bool { return x.sandbox.OwnsTerminals() }

// OpenPTY opens a terminal pair in the sandbox ([sandbox.Sandbox.OpenPTY]).
func (x *Exec) OpenPTY() (master, tty *os.File, err error) { return x.sandbox.OpenPTY() }

// Do runs f in the sandbox's view as its account ([sandbox.Sandbox.Do]),
// or in place on the host.
func (x *Exec) Do(f func() error) error { return x.sandbox.Do(f) }

// OOMKills reads the sandbox's count of memory-limit kills (0 on the
// host), to pass to OOMNote when the run ends.
func (x *Exec) OOMKills() uint64 { return x.sandbox.OOMKills() }

// OOMNote says, for a run that ended by SIGKILL the plane did not send,
// whether the sandbox's memory limit killed it since mark
// ([sandbox.Sandbox.OOMNote]); "" otherwise.
func (x *Exec) OOMNote(mark uint64) string { return x.sandbox.OOMNote(mark) }

// Workspace is where runs start by default.
func (x *Exec) Workspace() string { return x.workspace }

// DirError is a working directory that cannot be used: Path as resolved,
// and the cause (an *os.PathError with its errno, or ENOTDIR for a file).
type DirError struct {
	Path string
	Err  error
}

func (e *DirError) Error() string { return fmt.Sprintf("session: cwd %s: %v", e.Path, e.Err) }
func (e *DirError) Unwrap() error { return e.Err }

// Dir resolves dir against base (the workspace when base is empty); ""
// is base itself, unchecked. The result must be a directory, else a
// *DirError.
func (x *Exec) Dir(base, dir string) (string, error) {
	if base == "" {
		base = x.workspace
	}
	if dir == "" {
		return base, nil
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	var fi os.FileInfo
	err := x.Do(func() (err error) { fi, err = os.Stat(dir); return err })
	switch {
	case err != nil:
		return "", &DirError{Path: dir, Err: err}
	case !fi.IsDir():
		return "", &DirError{Path: dir, Err: &os.PathError{Op: "chdir", Path: dir, Err: syscall.ENOTDIR}}
	}
	return dir, nil
}

// Identity is the account a run uses; a nil *Identity is the daemon's
// own, with its environment as it is.
type Identity struct {
	// Name is the login as resolved.
	Name string
	// Cred is what a process started as the account needs.
	Cred *syscall.Credential
	// Env is the account's HOME, USER and LOGNAME.
	Env []string
}

// Account resolves name, or the default user when name is empty; nil
// when neither names anyone. The daemon's own account has no Cred (no
// switch) but its Env; any other needs root. The error is
// account.Lookup's client-facing sentence.
//
// In a sandbox every run is the sandbox account's: no name (or the
// default user's) and the account's own name resolve to it, with the
// workspace as HOME; any other name is refused, since no process there
// may take another identity.
func (x *Exec) Account(name string) (*Identity, error) {
	if x.sandbox != nil {
		acct, uid, _ := x.sandbox.Account()
		if name != "" && name != acct && name != strconv.Itoa(uid) {
			return nil, fmt.Errorf("cannot run as %s: under isolation every process runs as the sandbox account %s", name, acct)
		}
		// The sandbox sets the credential it starts with (Wrap).
		return &Identity{Name: acct, Cred: nil,
			Env: []string{"HOME=" + x.workspace, "USER=" + acct, "LOGNAME=" + acct}}, nil
	}
	if name == "" {
		name = x.defaultUser
	}
	if name == "" {
		return nil, nil
	}
	a, err := account.Lookup(name)
	if err != nil {
		return nil, err
	}
	return &Identity{Name: name, Cred: a.Credential(), Env: a.Env()}, nil
}

// Env is the environment of a child run as who (nil: the daemon's own
// account) with extra appended (later entries win for the exec'd
// program). The result is a fresh slice.
func (x *Exec) Env(who *Identity, extra ...string) []string {
	boxEnv := x.sandbox.Env() // the sandbox's own (a pool's create), after the daemon's
	out := make([]string, 0, len(x.env)+len(boxEnv)+3+len(extra))
	out = append(out, x.env...)
	out = append(out, boxEnv...)
	if who == nil && x.sandbox != nil {
		who, _ = x.Account("") // the sandbox account's HOME, USER, LOGNAME
	}
	if who != nil {
		out = append(out, who.Env...)
	}
	return append(out, extra...)
}

// ErrTimeout is the cause of a timeout out of its range.
var ErrTimeout = errors.New("timeout out of range")

// Seconds converts an optional timeout in seconds: absent is def; a
// present value must be a number in [min, max] (else ErrTimeout).
func Seconds(f *float64, def, min, max time.Duration) (time.Duration, error) {
	if f == nil {
		return def, nil
	}
	if math.IsNaN(*f) || *f < min.Seconds() || *f > max.Seconds() {
		return 0, ErrTimeout
	}
	return time.Duration(*f * float64(time.Second)), nil
}
