// Package commands is aiod's commands plane: one process per call, run
// directly under a shell (or none), with its stdout and stderr retained
// per stream and addressed by byte offset.
//
// It owns the [Engine] (sessions, commands, their process groups, output
// retention, kill and stdin) and the HTTP surface mounted by [Plane]: the
// v2 routes under /v2/commands (JSON and NDJSON streaming) and the v1
// compatibility routes /v1/bash/*, which adapt their field names onto the
// same engine. Terminals (/v2/pty, /v1/shell) are aiod/pty's. Exit codes are data: a command that ran is
// a 200 with success true whatever its exit code.
//
// It is built on the planes' shared kit. Its refusals are the api kinds
// (aiod/internal/api: ErrNotFound 404, ErrInvalid and its sub-kind
// ErrNotRunning 400, ErrUnavailable 503), answered by api's one status
// table; the one exception is "all sessions busy" (ErrBusy, 429 by the
// table), which the routes that create sessions answer 400 as the
// published API does. Its routes are api.Route declarations (plane.go,
// v1.go). Its sessions live in the shared registry (aiod/internal/
// sessions: one tier capped at [Config.MaxSessions], the least recently
// used idle session evicted at the cap, idle sessions reclaimed after
// [Config.SessionIdle]); a session is ended by [Engine.CloseSession].
// Commands run in the shared execution context (the account, the
// working directory check, the environment without the daemon's
// secrets, timeouts in seconds).
//
// Every child process is started in its own process group, and a kill, a
// hard timeout, a session close or [Plane.Close] reaches its whole tree:
// the group, and every process found below it in /proc, including those
// that left the group (setsid) and, the daemon being a child subreaper
// on Linux, those whose parent has exited, which each command remembers
// (its tree is recorded while it runs and when it exits). The zombies
// reparented to the daemon are reaped, pid by pid. A kill with SIGTERM
// or SIGINT is followed by SIGKILL to whatever of the tree is left after
// [Config.KillGrace], and the command reads completed with exit code -1 (the
// published API has no killed status in use); a kill of a command
// that has ended still reaches the processes it left behind. What the
// commands of an anonymous session left behind ends when the session is
// evicted at the limit or reclaimed when idle. Commands do not
// inherit the daemon's secrets (AIO_API_KEY, SANDBOX_API_KEY and
// [Config.HideEnv]).
package commands
