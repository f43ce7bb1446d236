package sandbox

import "errors"

// ErrCannotIsolate is in the chain of an error of [New] when the
// machine cannot make a sandbox at all: the daemon is neither root nor
// allowed a user namespace of its own, or the kernel refuses new
// namespaces (a container without the capability, a seccomp profile).
// Only such an error may let a caller fall back to isolation none (a2c
// up's default); any other (a refused workspace, a missing account) is
// a mistake in the request and stops the daemon.
var ErrCannotIsolate = errors.New("this machine cannot isolate")

// machineError is an error of the machine, not of the request: it
// matches ErrCannotIsolate and keeps its own cause and message.
type machineError struct{ err error }

func (e machineError) Error() string   { return e.err.Error() }
func (e machineError) Unwrap() []error { return []error{e.err, ErrCannotIsolate} }
