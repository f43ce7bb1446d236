package interp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/credenv"
)

// Pins name the interpreters to use instead of looking for them; empty
// fields are looked for.
type Pins struct {
	Python string
	Node   string
}

// Interpreter is what discovery found for one language.
type Interpreter struct {
	// Path is the binary; "" when none was found.
	Path string
	// Version is its version without a leading "v" ("3.11.2", "20.19.2").
	Version string
	// OK reports it is usable: for python, it imports ipykernel.
	OK bool
	// Problem and Hint say why it is not usable and what to install
	// (client-facing text); empty when OK.
	Problem, Hint string
}

// Finder probes the interpreters for one set of pins, each on first
// need, and keeps the answers: a usable interpreter for the life of the
// process, an unusable one (absent, or python without ipykernel) for
// five seconds only, so an interpreter installed while the daemon runs is
// found by every consumer at once. It is safe for concurrent use.
type Finder struct {
	pins Pins

	mu           sync.Mutex // held while probing: callers wait for one answer
	python, node Interpreter
	pyAt, nodeAt time.Time // when each answer was found; zero: never
	npmOnce      sync.Once
	npm          string
}

// recheck is how long an unusable answer is kept before the next ask
// probes again (a variable for tests).
var recheck = 5 * time.Second

// stale reports whether an answer found at at must be probed again.
func stale(i Interpreter, at time.Time) bool {
	return at.IsZero() || (!i.OK && time.Since(at) >= recheck)
}

var (
	mu      sync.Mutex
	finders = map[Pins]*Finder{}
)

// Shared returns the process's finder for pins: every caller with the
// same pins gets the same answers.
func Shared(pins Pins) *Finder {
	mu.Lock()
	defer mu.Unlock()
	f := finders[pins]
	if f == nil {
		f = &Finder{pins: pins}
		finders[pins] = f
	}
	return f
}

// probeTimeout bounds each probe command; a hung interpreter counts as
// absent.
const probeTimeout = 20 * time.Second

// output runs a probe command and returns its trimmed stdout.
func output(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = credenv.Environ() // a probe needs none of the daemon's credentials
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("interp: probe %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

const (
	importKernel = "import ipykernel, platform; print(platform.python_version())"
	pyVersion    = "import platform; print(platform.python_version())"
)

// pythonCandidates lists the pythons to try, in order, as found on this
// machine (duplicates dropped).
func (f *Finder) pythonCandidates() (found, looked []string) {
	looked = []string{f.pins.Python}
	if f.pins.Python == "" {
		looked = []string{"/usr/bin/python3", "python3", "python"}
	}
	seen := map[string]bool{}
	for _, c := range looked {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || seen[p] {
			continue
		}
		seen[p] = true
		found = append(found, p)
	}
	return found, looked
}

// Python is the kernel interpreter (see the package doc).
func (f *Finder) Python() Interpreter {
	f.mu.Lock()
	defer f.mu.Unlock()
	if stale(f.python, f.pyAt) {
		found, looked := f.pythonCandidates()
		py := Interpreter{}
		for _, c := range found {
			if v, err := output(c, "-c", importKernel); err == nil {
				py = Interpreter{Path: c, Version: v, OK: true}
				break
			}
			if py.Path == "" {
				py.Path = c
				py.Version, _ = output(c, "-c", pyVersion)
			}
		}
		switch {
		case py.Path == "":
			py.Problem = "No python interpreter found (looked for " + strings.Join(looked, ", ") + ")"
			py.Hint = "install python3 and python3-ipykernel (or pip install ipykernel)"
		case !py.OK:
			py.Problem = "ipykernel is not importable by " + py.Path
			py.Hint = "install python3-ipykernel (or pip install ipykernel) for " + py.Path
		}
		f.python, f.pyAt = py, time.Now()
	}
	return f.python
}

// Node is the node binary (see the package doc).
func (f *Finder) Node() Interpreter {
	f.mu.Lock()
	defer f.mu.Unlock()
	if stale(f.node, f.nodeAt) {
		looked := []string{f.pins.Node}
		if f.pins.Node == "" {
			looked = []string{"node", "nodejs"}
		}
		n := Interpreter{}
		for _, c := range looked {
			if p, err := exec.LookPath(c); err == nil {
				if v, err := output(p, "--version"); err == nil {
					n = Interpreter{Path: p, Version: strings.TrimPrefix(v, "v"), OK: true}
					break
				}
			}
		}
		if !n.OK {
			n.Problem = "No node interpreter found (looked for " + strings.Join(looked, ", ") + ")"
			n.Hint = "install nodejs"
		}
		f.node, f.nodeAt = n, time.Now()
	}
	return f.node
}

// NPM is npm's version, or "" without npm.
func (f *Finder) NPM() string {
	f.npmOnce.Do(func() { f.npm, _ = output("npm", "--version") })
	return f.npm
}
