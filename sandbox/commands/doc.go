// Package commands is aiod's commands plane: one process per call, run
// directly under a shell (or none), with its stdout and stderr retained
// per stream and addressed by byte offset.
//
// It owns the [Engine] (sessions, commands, their process groups, output
// retention, kill and stdin) and the HTTP surface mounted by [Plane]: the
// v2 routes under /v2/commands (JSON and NDJSON streaming) and the v1
// compatibility routes /v1/bash/* and /v1/shell/*, which adapt their field
// names onto the same engine. Exit codes are data: a command that ran is
// a 200 with success true whatever its exit code.
//
// Every child process is started in its own process group, so a kill, a
// hard timeout, a session close or [Plane.Close] reaches the whole tree.
package commands
