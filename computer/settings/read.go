package settings

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxFileSize bounds every file the management plane reads: settings,
// mcp.json, the derived files and a marketplace's catalog and plugin
// manifests. Real ones are a few KiB.
const MaxFileSize = 4 << 20

// ErrNotRegular is [ReadFile]'s error for a path that is not a regular
// file (a device, a FIFO, a directory).
var ErrNotRegular = errors.New("not a regular file")

// ReadFile reads the file at path, as the management plane reads all of
// its files, some of which come from a cloned repository: it opens
// without blocking (a FIFO does not hang it), refuses anything but a
// regular file (/dev/zero, a terminal) and a file over MaxFileSize, and
// never reads more than that. A missing file is fs.ErrNotExist.
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxFileSize)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxFileSize)
	}
	return b, nil
}
