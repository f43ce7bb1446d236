package sandbox

import "github.com/a2c-smcp/a2c-go/aiod/internal/api"

// ErrBusy is [Sandbox.Do]'s answer when every thread it may use is busy
// and none came free within the caller's wait. It is an
// [api.ErrUnavailable] (HTTP 503, retryable) through the planes' one
// kind → status table; a plane that words its own refusals keeps the
// kind (errors.Is(err, ErrBusy)).
var ErrBusy = api.NewKind("the sandbox is busy: every thread of its view is in use; try again", api.ErrUnavailable)
