package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadClusterKey: --cluster-key or --cluster-key-file (not both)
// beats $A2C_CLUSTER_KEY; white space around the key is not part of it;
// an empty or missing file, or a blank key, is an error that does not
// show the key.
func TestReadClusterKey(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("key from the file, long enough\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("A2C_CLUSTER_KEY", "key from the environment")
	for _, tc := range []struct {
		flag, file, want string
	}{
		{"key from the flag", "", "key from the flag"},
		{"", file, "key from the file, long enough"},
		{"", "", "key from the environment"},
	} {
		got, err := readClusterKey(tc.flag, tc.file)
		if err != nil || string(got) != tc.want {
			t.Errorf("flag %q file %q: %q %v, want %q", tc.flag, tc.file, got, err, tc.want)
		}
	}
	t.Setenv("A2C_CLUSTER_KEY", "")
	if got, err := readClusterKey("", ""); got != nil || err != nil {
		t.Errorf("no key: %q %v", got, err)
	}
	if _, err := readClusterKey("", empty); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty file: %v", err)
	}
	if _, err := readClusterKey("", filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
	// The flag and the file together are a usage error, not the flag
	// silently winning over a file that may not even exist.
	if _, err := readClusterKey("key from the flag", file); err == nil || !strings.Contains(err.Error(), "exclusive") {
		t.Errorf("flag and file: %v", err)
	}
	// A blank key is an error, never a cluster without a key.
	if _, err := readClusterKey("   ", ""); err == nil {
		t.Error("blank flag: no error")
	}
	t.Setenv("A2C_CLUSTER_KEY", " \t")
	if _, err := readClusterKey("", ""); err == nil {
		t.Error("blank $A2C_CLUSTER_KEY: no error")
	}
	// White space around the key is no part of it, from any source.
	spaced := filepath.Join(dir, "spaced")
	if err := os.WriteFile(spaced, []byte("  key with spaces around it  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile, _ := readClusterKey("", spaced)
	t.Setenv("A2C_CLUSTER_KEY", "key with spaces around it ")
	fromEnv, _ := readClusterKey("", "")
	if string(fromFile) != "key with spaces around it" || string(fromEnv) != string(fromFile) {
		t.Errorf("file %q and environment %q differ", fromFile, fromEnv)
	}
}

// TestReadSecretFile: a secret file is a small regular file; a FIFO (which
// would block the start for ever), a device or a directory is refused at
// once, and a long file is not read whole.
func TestReadSecretFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, "long")
	if err := os.WriteFile(long, make([]byte, maxSecretFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "not a regular file"},
		{"/dev/zero", "not a regular file"},
		{dir, "not a regular file"},
		{long, "longer than"},
	} {
		done := make(chan error, 1)
		go func() { _, err := readSecretFile(tc.path, "cluster key"); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still reading after 5 s", tc.path)
		}
	}
}
