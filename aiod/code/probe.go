package code

import (
	"context"

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
