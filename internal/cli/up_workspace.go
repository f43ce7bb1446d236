package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// makeWorkspace creates the directory ws and the missing directories
// above it, and returns undo, which removes exactly the directories it
// created, deepest first, each only while it is still empty: a folder
// that existed before, or one where anything was put since, stays.
// a2c up calls undo when it fails, so a refused start leaves the
// machine as it found it.
func makeWorkspace(ws string) (undo func(), err error) {
	var made []string // deepest first
	for d := filepath.Clean(ws); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		made = append(made, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	undo = func() {
		for _, d := range made {
			// rmdir refuses a directory with entries: nothing inside is lost.
			if os.Remove(d) != nil {
				return
			}
		}
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		undo()
		return func() {}, err
	}
	return undo, nil
}
