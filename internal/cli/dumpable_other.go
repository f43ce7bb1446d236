//go:build !linux

package cli

import "os"

// hideSelf does nothing where there is no prctl.
func hideSelf() error { return nil }

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && f.Name() != os.DevNull
}
