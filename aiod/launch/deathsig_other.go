//go:build !linux

package launch

import "syscall"

// dieWithParent does nothing off Linux, which has no parent-death
// signal: an orderly stop ends the programs.
func dieWithParent(*syscall.SysProcAttr) {}
