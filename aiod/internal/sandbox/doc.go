// Package sandbox is aiod's containment: one set of Linux namespaces
// (mount, PID, IPC, UTS, optionally network) and one cgroup that every
// process the daemon starts (commands, terminals, kernels, node REPLs)
// runs in, and the view of the filesystem the files, transfer and watch
// planes see.
//
// aiod creates one sandbox; a pool (aiod pool) creates many in one
// process, each from its own [Config] ([Config.Name] names its cgroups,
// [Config.UID] gives it ids of its own). A small init process (this
// binary run as [InitArg]) is started in fresh namespaces; it builds the
// view (the system directories read-only, its own /tmp, /dev and /proc,
// the workspace read-write at its usual path), pivots into it and then
// only waits (the kernel reaps orphans for it). The daemon never runs
// inside it: it keeps OS threads that have joined the sandbox's
// namespaces (setns on a locked thread after unshare(CLONE_FS)): the
// spawner, always, and up to four for Do, started as calls need them,
// so an idle sandbox costs the daemon one thread. A process started from such a thread
// is born inside the sandbox, so the planes keep using os/exec and host
// PIDs unchanged ([Sandbox.Wrap]); file operations run on threads that
// also take the sandbox account's file-system identity, so the kernel
// resolves every path, symlinks included, against the sandbox's root
// and checks permissions as that account ([Sandbox.Do]).
//
// Every sandboxed process is born with no_new_privs, no capability (an
// empty bounding set, nothing inheritable or ambient) and a seccomp
// filter, Docker's default profile for an unprivileged container
// (seccomp_linux.go): the spawner thread carries all three and its
// children inherit them. The init gives them up once its view is built
// and executes itself again, so no thread of it keeps a capability.
// [Sandbox.Do] holds at most 32 threads; past them a call waits, then
// fails with [ErrBusy].
//
// [Sandbox.Pause] freezes every process of the sandbox with the cgroup
// freezer (no thread of the daemon is ever in a frozen group; starts
// while paused fail with [ErrPaused]) and [Sandbox.Resume] thaws them;
// [Sandbox.Usage] reads its cgroups' counters; [Sandbox.DialContext]
// connects from inside its network namespace (a port of its own
// loopback).
//
// A nil *Sandbox is isolation "none": Wrap returns its argument and Do
// calls its function in place, so a plane needs no second code path.
package sandbox
