//go:build !linux

package sandbox

// InUserNamespace reports whether the process runs in a user namespace
// of its own; never, off Linux.
func InUserNamespace() bool { return false }
