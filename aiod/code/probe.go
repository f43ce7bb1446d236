package code

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/a2c-smcp/a2c-go/aiod/internal/interp"
)

// interpreter is what discovery found for one language.
type interpreter struct {
	path    string // "" when none was found
	version string
	ok      bool   // usable (for python: imports ipykernel)
	err     *Error // why not, when !ok
}

// of is an interp answer with its refusal.
func of(i interp.Interpreter) interpreter {
	in := interpreter{path: i.Path, version: i.Version, ok: i.OK}
	if !i.OK {
		in.err = &Error{Kind: ErrUnavailable, Message: i.Problem, Hint: i.Hint}
	}
	return in
}

// pythonProbe is the kernel interpreter, as the daemon's one discovery
// (aiod/internal/interp) found it for Config.Python, and usable only
// when a sandboxed kernel can run it ([Engine.visible]).
func (e *Engine) pythonProbe() interpreter {
	return e.visible(of(e.interp.Python()), "python", "AIO_PYTHON_BIN=/usr/bin/python3")
}

// nodeProbe is node, as discovery found it for Config.Node (and, under
// a sandbox, visible in it).
func (e *Engine) nodeProbe() interpreter {
	return e.visible(of(e.interp.Node()), "node", "AIO_NODE_BIN=/usr/bin/node")
}

// visible turns a usable interpreter unusable when the daemon runs code
// in a sandbox whose view does not hold it. Discovery runs on the host,
// where a python under /root (a pyenv, say) is as good as one under
// /usr; the sandbox shows only the system directories and the
// workspace, so a kernel started there would die at exec. Refusing it
// here names the interpreter and the fix, where the run would otherwise
// fail with nothing but "could not be started". The answer is kept per
// path (a pinned interpreter does not move into the view).
func (e *Engine) visible(i interpreter, name, fix string) interpreter {
	sb := e.cfg.Sandbox
	if sb == nil || !i.ok {
		return i
	}
	if v, ok := e.viewed.Load(i.path); ok {
		if refusal := v.(*Error); refusal != nil {
			i.ok, i.err = false, refusal
		}
		return i
	}
	err := sb.Do(func() error { _, err := os.Stat(i.path); return err })
	var refusal *Error
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		refusal = &Error{Kind: ErrUnavailable,
			Message: "The " + name + " interpreter " + i.path + " is outside the sandbox: isolated code sees only /usr, /bin, /lib, /etc, /opt and the workspace",
			Hint:    "set " + fix + " (an interpreter under /usr or /opt), or run aiod with --isolation none"}
	case errors.Is(err, fs.ErrPermission):
		acct, _, _ := sb.Account()
		refusal = &Error{Kind: ErrUnavailable,
			Message: "The " + name + " interpreter " + i.path + " cannot be read by the sandbox account " + acct,
			Hint:    "set " + fix + " (an interpreter every account may run)"}
	default: // the sandbox itself failed; ask again next time
		e.log.Warn("code: cannot check the interpreter in the sandbox", "interpreter", i.path, "error", err.Error())
		return interpreter{path: i.path, version: i.version,
			err: &Error{Kind: ErrUnavailable, Message: "The sandbox is not available", Hint: "check the daemon's log"}}
	}
	if _, dup := e.viewed.LoadOrStore(i.path, refusal); !dup && refusal != nil {
		e.log.Warn("code: "+refusal.Message, "fix", refusal.Hint)
	}
	if refusal != nil {
		i.ok, i.err = false, refusal
	}
	return i
}

// npmVersion is npm's version, or "" without npm.
func (e *Engine) npmVersion() string { return e.interp.NPM() }

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
