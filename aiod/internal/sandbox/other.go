//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
)

// InitArg is the first argument that makes this binary the sandbox's
// init; sandboxes exist on Linux only.
const InitArg = "__aiod-sandbox-init"

// Init is the sandbox's init; on this system it only fails.
func Init([]string) int { return 1 }

// Sandbox is a running sandbox; on this system there is none.
type Sandbox struct{ env atomic.Pointer[[]string] }

// New fails: isolation needs Linux.
func New(Config, *slog.Logger) (*Sandbox, error) {
	return nil, machineError{errors.New("isolation namespaces needs Linux")}
}

// Wrap returns start.
func (s *Sandbox) Wrap(_ *exec.Cmd, start func() error) func() error { return start }

// Do calls f.
func (s *Sandbox) Do(f func() error) error { return f() }

// DoContext calls f.
func (s *Sandbox) DoContext(_ context.Context, f func() error) error { return f() }

// Close does nothing.
func (s *Sandbox) Close() error { return nil }

// Report says none.
func (s *Sandbox) Report() Report { return Report{Isolation: None} }

// Account has none.
func (s *Sandbox) Account() (string, int, int) { return "", 0, 0 }

// Probe reads what the machine allows: nothing, here.
func Probe() Machine { return Machine{Cgroup: "none"} }

// OpenInView fails: there is no sandbox here.
func (s *Sandbox) OpenInView(string) (*os.File, error) {
	return nil, errors.New("isolation namespaces needs Linux")
}

// OOMKills is 0: there is no sandbox here.
func (s *Sandbox) OOMKills() uint64 { return 0 }

// OOMNote is "": there is no sandbox here.
func (s *Sandbox) OOMNote(uint64) string { return "" }

// ReexecUnprivileged does nothing: there is no sandbox here.
func ReexecUnprivileged([]string) (int, bool) { return 0, false }

// Pause fails: there is no sandbox here.
func (s *Sandbox) Pause() error { return errors.New("isolation namespaces needs Linux") }

// Resume does nothing.
func (s *Sandbox) Resume() error { return nil }

// Paused is false.
func (s *Sandbox) Paused() bool { return false }

// Usage fails: there is no sandbox here.
func (s *Sandbox) Usage() (Usage, error) {
	return Usage{}, errors.New("isolation namespaces needs Linux")
}

// DialContext is a plain dial.
func (s *Sandbox) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// BuildMask needs Linux (a whole machine's layers).
func BuildMask(string) error { return errors.New("sandbox: a whole machine needs Linux") }

// OwnsTerminals reports false: terminals open on the host.
func (s *Sandbox) OwnsTerminals() bool { return false }

// OpenPTY needs Linux.
func (s *Sandbox) OpenPTY() (*os.File, *os.File, error) {
	return nil, nil, errors.New("sandbox: needs Linux")
}
