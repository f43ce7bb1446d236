//go:build !linux

package main

import "os/exec"

// orphanKill does nothing where the kernel has no parent-death signal:
// the benchmark's own cleanup stops its children.
func orphanKill(*exec.Cmd) {}
