package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// maxSecretFile bounds a secret file (a token, a cluster key): secrets
// are short, and a path to /dev/zero or a log file must not be read
// whole.
const maxSecretFile = 4096

// readSecretFile reads the secret in a --*-file flag's file: a regular
// file of at most maxSecretFile bytes, trimmed of surrounding white space
// (the newline an editor or `echo` adds), not empty. what names the
// secret in errors, which carry the path but never the content. The file
// is opened without blocking, so a FIFO (or a device) is refused rather
// than waited on for ever.
func readSecretFile(path, what string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("read %s file: %w", what, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read %s file: %w", what, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s file %s is not a regular file", what, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("read %s file: %w", what, err)
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s file %s is longer than %d bytes", what, path, maxSecretFile)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s file %s is empty", what, path)
	}
	return s, nil
}

// errSecretBoth is the usage error of a secret given both inline and as a
// file.
func errSecretBoth(flag string) error {
	return usageError{"--" + flag + " and --" + flag + "-file are exclusive"}
}
