//go:build !linux

package desktop

import "syscall"

// childAttr is nothing special off Linux: an orderly stop ends the
// worker's programs.
func childAttr() *syscall.SysProcAttr { return nil }
