package sandbox

import (
	"errors"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// ErrBusy is [Sandbox.Do]'s answer when every thread it may use is busy
// and none came free within the caller's wait. It is an
// [api.ErrUnavailable] (HTTP 503, retryable) through the planes' one
// kind → status table; a plane that words its own refusals keeps the
// kind (errors.Is(err, ErrBusy)).
var ErrBusy = api.NewKind("the sandbox is busy: every thread of its view is in use; try again", api.ErrUnavailable)

// ErrPaused is the answer of [Sandbox.Wrap] while the sandbox is paused
// ([Sandbox.Pause]): a process started then would be frozen before its
// first instruction, and its starter (a plane waiting for its output or
// its terminal) with it. The caller resumes the sandbox first (the
// pool does, before it forwards a request). It is an
// [api.ErrConflict] (HTTP 409): the request is fine, the sandbox's
// state is not.
var ErrPaused = api.NewKind("the sandbox is paused; resume it first", api.ErrConflict)

// ErrNoCgroups is the answer of Pause and Usage where the sandbox has no
// cgroup freezer or no cgroups at all (an unprivileged daemon, a machine
// without them): the facility is missing, not the call wrong.
var ErrNoCgroups = errors.New("sandbox: pausing and usage need cgroups with the freezer, which this sandbox does not have (run the daemon as root on a machine with cgroups)")
