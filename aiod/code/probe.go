package code

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/account"
)

// interpreter is what a probe found for one language.
type interpreter struct {
	path    string // "" when none was found
	version string
	ok      bool   // usable (for python: imports ipykernel)
	err     *Error // why not, when !ok
}

// probes are run once per engine, on first need, and kept: install
// ipykernel or node before the daemon starts.
type probes struct {
	pyOnce, nodeOnce, npmOnce sync.Once
	python, node              interpreter
	npm                       string
}

const probeTimeout = 20 * time.Second

// output runs a probe command and returns its trimmed stdout.
func output(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	b, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "", fmt.Errorf("probe %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

const importKernel = "import ipykernel, platform; print(platform.python_version())"

// pythonProbe finds the kernel interpreter: Config.Python, else
// /usr/bin/python3 when it imports ipykernel, else python3 on PATH.
func (e *Engine) pythonProbe() interpreter {
	e.probes.pyOnce.Do(func() {
		ctx := context.Background()
		cands := []string{e.cfg.Python}
		if e.cfg.Python == "" {
			cands = []string{"/usr/bin/python3"}
			if p, err := exec.LookPath("python3"); err == nil && p != cands[0] {
				cands = append(cands, p)
			}
		}
		py := interpreter{}
		for _, c := range cands {
			if fi, err := os.Stat(c); err != nil || fi.IsDir() {
				continue
			}
			if v, err := output(ctx, c, "-c", importKernel); err == nil {
				py = interpreter{path: c, version: v, ok: true}
				break
			}
			if py.path == "" {
				py.path = c
				py.version, _ = output(ctx, c, "-c", "import platform; print(platform.python_version())")
			}
		}
		switch {
		case py.path == "":
			py.err = &Error{Kind: ErrUnavailable, Message: "No python interpreter found (looked for " + strings.Join(cands, ", ") + ")",
				Hint: "install python3 and python3-ipykernel (or pip install ipykernel)"}
		case !py.ok:
			py.err = &Error{Kind: ErrUnavailable, Message: "ipykernel is not importable by " + py.path,
				Hint: "install python3-ipykernel (or pip install ipykernel) for " + py.path}
		}
		e.probes.python = py
	})
	return e.probes.python
}

// nodeProbe finds node: Config.Node, else node or nodejs on PATH.
func (e *Engine) nodeProbe() interpreter {
	e.probes.nodeOnce.Do(func() {
		cands := []string{e.cfg.Node}
		if e.cfg.Node == "" {
			cands = []string{"node", "nodejs"}
		}
		n := interpreter{}
		for _, c := range cands {
			if p, err := exec.LookPath(c); err == nil {
				if v, err := output(context.Background(), p, "--version"); err == nil {
					n = interpreter{path: p, version: strings.TrimPrefix(v, "v"), ok: true}
					break
				}
			}
		}
		if !n.ok {
			n.err = &Error{Kind: ErrUnavailable, Message: "No node interpreter found (looked for " + strings.Join(cands, ", ") + ")",
				Hint: "install nodejs"}
		}
		e.probes.node = n
	})
	return e.probes.node
}

// npmVersion is npm's version, or "" without npm.
func (e *Engine) npmVersion() string {
	e.probes.npmOnce.Do(func() { e.probes.npm, _ = output(context.Background(), "npm", "--version") })
	return e.probes.npm
}

// available reports ErrUnavailable (naming what was looked for) when
// lang has no usable interpreter.
func (e *Engine) available(_ context.Context, lang string) error {
	i := e.pythonProbe()
	if lang == JavaScript {
		i = e.nodeProbe()
	}
	if !i.ok {
		return i.err
	}
	return nil
}

// identity is an account a run switches to; nil is the daemon's own.
type identity struct {
	cred *syscall.Credential
	env  []string // HOME, USER, LOGNAME
}

// identity resolves name (or the default user). The daemon's own
// account needs no switch; any other needs root. The error text is for
// the client (a ProcessError output).
func (e *Engine) identity(name string) (*identity, error) {
	if name == "" {
		name = e.cfg.DefaultUser
	}
	if name == "" {
		return nil, nil
	}
	a, err := account.Lookup(name)
	if err != nil {
		return nil, err
	}
	return &identity{cred: a.Credential(), env: a.Env()}, nil
}
