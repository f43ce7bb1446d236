package sandbox

import "slices"

// SetEnv sets variables (KEY=VALUE) every process the sandbox starts
// from now on gets, after the daemon's own: a pool gives a warm sandbox
// the environment its create asked for when it is claimed. Safe for
// concurrent use; nil-safe (isolation none has no sandbox to hold them).
func (s *Sandbox) SetEnv(env []string) {
	if s == nil {
		return
	}
	c := slices.Clone(env)
	s.env.Store(&c)
}

// Env returns what SetEnv set (nil: nothing, or no sandbox).
func (s *Sandbox) Env() []string {
	if s == nil {
		return nil
	}
	if e := s.env.Load(); e != nil {
		return *e
	}
	return nil
}
