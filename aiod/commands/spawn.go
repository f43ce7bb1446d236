package commands

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/sessions"
)

// Shell selectors of the v2 shell field.
const (
	ShellAuto       = "auto"
	ShellBash       = "bash"
	ShellSh         = "sh"
	ShellPowerShell = "powershell"
	ShellCmd        = "cmd"
	ShellNone       = "none"
)

// lookupTTL bounds how long a shell path or an account stays cached.
const lookupTTL = 10 * time.Second

type cached[T any] struct {
	val     T
	expires time.Time
}

// ttlCache memoizes a successful lookup for lookupTTL, so a request
// never pays for a PATH walk or an /etc/passwd parse twice in a row.
// Failures are not kept: an account or a shell installed a moment ago
// is found on the next call.
type ttlCache[T any] struct {
	mu sync.Mutex
	m  map[string]cached[T]
}

func (c *ttlCache[T]) get(key string, load func(string) (T, error)) (T, error) {
	now := time.Now()
	c.mu.Lock()
	if v, ok := c.m[key]; ok && now.Before(v.expires) {
		c.mu.Unlock()
		return v.val, nil
	}
	c.mu.Unlock()
	val, err := load(key)
	if err != nil {
		return val, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) > 256 {
		c.m = map[string]cached[T]{}
	}
	c.m[key] = cached[T]{val, now.Add(lookupTTL)}
	c.mu.Unlock()
	return val, nil
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// shellPath resolves a selector (not none) to an interpreter. A named
// selector never falls back to another shell; a missing one is
// ErrUnavailable naming what was looked for.
func (e *Engine) shellPath(sel string) (string, error) {
	return e.shellCache.get(sel, func(sel string) (string, error) {
		var paths, names []string
		switch sel {
		case ShellAuto:
			paths = []string{e.bashBin, "/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh"}
		case ShellBash:
			paths, names = []string{e.bashBin, "/bin/bash", "/usr/bin/bash"}, []string{"bash"}
		case ShellSh:
			paths, names = []string{"/bin/sh", "/usr/bin/sh"}, []string{"sh"}
		case ShellPowerShell:
			names = []string{"pwsh", "powershell"}
		case ShellCmd:
			if runtime.GOOS != "windows" {
				return "", unavailable(`shell "cmd" is not available: cmd.exe runs only on Windows`, `use "shell": "auto", "bash" or "sh"`)
			}
			names = []string{"cmd.exe"}
		}
		for _, p := range paths {
			if p != "" && executable(p) {
				return p, nil
			}
		}
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return p, nil
			}
		}
		return "", unavailable(fmt.Sprintf("shell %q is not available: none of %s was found", sel, strings.Join(append(nonEmpty(paths), names...), ", ")),
			`use "shell": "auto", or install the shell`)
	})
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// argv is the interpreter's argument vector for a script.
func argv(sel, path, script string) []string {
	if sel == ShellPowerShell {
		return []string{path, "-NoProfile", "-NonInteractive", "-Command", script}
	}
	return []string{path, "-c", script}
}

// lookupIdentity resolves an account name (not empty) to run as,
// through the shared execution context, cached for lookupTTL. The
// daemon's own account needs no switch and is accepted (root included,
// when aiod runs as root); unknown accounts and a non-root daemon asked
// to switch (to root as to anyone else) are ErrInvalid.
func (e *Engine) lookupIdentity(name string) (*sessions.Identity, error) {
	return e.userCache.get(name, func(name string) (*sessions.Identity, error) {
		id, err := e.exec.Account(name)
		if err != nil {
			return nil, invalid(err.Error(), "")
		}
		return id, nil
	})
}
