//go:build !linux

package commands

// setSubreaper is Linux only; elsewhere orphans go to init.
func setSubreaper() error { return nil }
