package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadClusterKey: --cluster-key beats --cluster-key-file beats
// $A2C_CLUSTER_KEY; a file's trailing newline is not part of the key; an
// empty or missing file is an error that does not show the key.
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
		{"key from the flag", file, "key from the flag"},
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
}
