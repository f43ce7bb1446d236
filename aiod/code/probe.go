package code

import (
	"context"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/account"
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
// (aiod/internal/interp) found it for Config.Python.
func (e *Engine) pythonProbe() interpreter { return of(e.interp.Python()) }

// nodeProbe is node, as discovery found it for Config.Node.
func (e *Engine) nodeProbe() interpreter { return of(e.interp.Node()) }

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
