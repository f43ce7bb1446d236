package sandbox

import (
	"os"
	"slices"
	"syscall"
	"testing"
)

// TestFilterEncoding: the filter init reads from the daemon's pipe is
// the daemon's, instruction for instruction; a torn or empty one is
// refused.
func TestFilterEncoding(t *testing.T) {
	prog, err := filterProgram()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = w.Write(encodeFilter(prog)); w.Close() }()
	fd, err := syscall.Dup(int(r.Fd())) // readFilter closes what it reads
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	got, err := readFilter(fd)
	if err != nil || !slices.Equal(got, prog) {
		t.Fatalf("read %d instructions of %d: %v", len(got), len(prog), err)
	}
	for _, bad := range [][]byte{nil, make([]byte, 7), make([]byte, 8*4097)} {
		if _, err := decodeFilter(bad); err == nil {
			t.Errorf("%d bytes accepted", len(bad))
		}
	}
}
