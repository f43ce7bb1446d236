package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrReadOnly is the error of a write to a scope that is not user,
// project or local.
var ErrReadOnly = errors.New("read-only")

// ReadOnlyError is the message of a write to scope s that cannot be
// written, as the CLI prints it.
func ReadOnlyError(s Scope) error {
	return fmt.Errorf("scope %q is %w (writable: user|project|local)", s, ErrReadOnly)
}

// Set writes value at key (dotted for a nested key) in scope s's
// settings file, keeping everything else in it. A known key's value is
// checked first, as [Load] would check it in that scope: a value Load
// would drop, or part of, is refused.
func Set(p Paths, s Scope, key string, value any) error {
	if err := checkWrite(p, s, key); err != nil {
		return err
	}
	// The value as JSON reads it back (numbers, lists, objects).
	b, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("settings: %s: %w", key, err)
	}
	var v any
	_ = json.Unmarshal(b, &v)
	probe := map[string]any{}
	setPath(probe, key, v)
	if errs := checkLayer(s, p.SettingsFile(s), probe); len(errs) > 0 {
		return fmt.Errorf("settings: %s: %s", errs[0].Field, errs[0].Reason)
	}
	return update(p.SettingsFile(s), func(m map[string]any) bool { setPath(m, key, v); return true })
}

// Delete removes key (dotted for a nested key) from scope s's settings
// file, keeping everything else. A key that is not there changes
// nothing.
func Delete(p Paths, s Scope, key string) error {
	if err := checkWrite(p, s, key); err != nil {
		return err
	}
	return update(p.SettingsFile(s), func(m map[string]any) bool { return deletePath(m, key) })
}

func checkWrite(p Paths, s Scope, key string) error {
	if !s.Writable() {
		return ReadOnlyError(s)
	}
	if err := checkWorkspaceDir(p, s); err != nil {
		return err
	}
	if key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
		return fmt.Errorf("settings: %q is not a key", key)
	}
	return nil
}

func setPath(m map[string]any, key string, v any) {
	parts := strings.Split(key, ".")
	for _, k := range parts[:len(parts)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

func deletePath(m map[string]any, key string) bool {
	parts := strings.Split(key, ".")
	for _, k := range parts[:len(parts)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return false
		}
		m = next
	}
	if _, ok := m[parts[len(parts)-1]]; !ok {
		return false
	}
	delete(m, parts[len(parts)-1])
	return true
}

// update changes the JSON object in path under its lock: change returns
// whether it changed anything (nothing is written otherwise). A file
// that is not a JSON object is not overwritten.
func update(path string, change func(map[string]any) bool) error {
	unlock, err := lockMaking(path)
	if err != nil {
		return err
	}
	defer unlock()
	m, err := readObject(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m = map[string]any{}
	case err != nil:
		return notObjectError(fmt.Sprintf("settings: %s is %s; fix or remove it first", path, strings.SplitN(err.Error(), ":", 2)[0]))
	}
	if !change(m) {
		return nil
	}
	return writeJSON(path, "", m)
}

// errNotObject is what update's refusal to overwrite a file that is not
// a JSON object is (errors.Is), whatever its message says.
var errNotObject = errors.New("not a JSON object")

type notObjectError string

func (e notObjectError) Error() string        { return string(e) }
func (e notObjectError) Is(target error) bool { return target == errNotObject }

// lockMaking takes path's lock (Lock), making its directory first.
func lockMaking(path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	return Lock(path)
}

// writeJSON writes header (a line, if not empty) and v as indented JSON
// to path, atomically; the caller holds the lock.
func writeJSON(path, header string, v any) error {
	var b bytes.Buffer
	if header != "" {
		b.WriteString(header + "\n")
	}
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	return WriteAtomic(path, b.Bytes(), 0o644)
}

// Lock takes the sidecar lock <path>.lock: a non-blocking try, then up
// to ten more after a backoff doubling from 50 ms to 1 s. It returns the
// unlock.
func Lock(path string) (unlock func(), err error) {
	return lockBackoff(path, 6500*time.Millisecond, time.Second)
}

// LockWait is [Lock] that keeps trying for up to wait (a backoff of 50 ms
// doubling to 100 ms: an operation's lock is waited for by a person). The lock file is never followed if it is a symbolic
// link (a repository cannot point it elsewhere), and neither is a
// working directory's .tfrobot (see checkWrite).
func LockWait(path string, wait time.Duration) (unlock func(), err error) {
	return lockBackoff(path, wait, 100*time.Millisecond)
}

// lockBackoff takes path's lock, trying for up to wait with a pause from
// 50 ms doubling up to most.
func lockBackoff(path string, wait, most time.Duration) (unlock func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("settings: lock %s.lock: cannot be opened (a symbolic link, or no permission)", path)
	}
	start, pause := time.Now(), 50*time.Millisecond
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Since(start) >= wait {
			f.Close()
			return nil, fmt.Errorf("settings: %s is locked by another writer", path)
		}
		time.Sleep(pause)
		pause = min(2*pause, most)
	}
}

// WriteAtomic replaces path with b: a temporary file beside it, synced,
// then renamed over it.
func WriteAtomic(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("settings: writing %s: %w", path, err)
	}
	return nil
}

// checkWorkspaceDir refuses to write the project or local scope through
// a .tfrobot that is a symbolic link: a repository could point it at any
// folder, and a write meant for it would land there.
func checkWorkspaceDir(p Paths, s Scope) error {
	if s != Project && s != Local {
		return nil
	}
	dir := filepath.Dir(p.SettingsFile(s))
	if st, err := os.Lstat(dir); err == nil && st.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("settings: %s is a symbolic link; not written through", dir)
	}
	return nil
}
