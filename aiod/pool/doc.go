// Package pool is aiod's sandboxes on demand (aiod pool, and the
// in-process pool of a2c up): it creates, runs, pauses and ends many
// sandboxes on one host and serves the contract of
// shared/spec/sandboxes.md.
//
// A sandbox here is an init in namespaces of its own (package
// aiod/internal/sandbox: mount, PID, IPC, UTS and network; its own cgroup,
// workspace, /tmp and account) plus a set of aiod plane engines in this
// process, reached under /sandboxes/{id}/: the pool never starts a second
// daemon process per sandbox. The pool's own routes (/v2/sandboxes) are
// plain JSON objects with errors as {"error":{"code","message"}}; the
// per-sandbox routes answer exactly as a lone aiod does.
//
// The package also holds the wire types of that API ([Sandbox],
// [CreateRequest], [Metrics]) and [Client], the Go client of it, so the
// rules of a field live in one place for both ends.
package pool
