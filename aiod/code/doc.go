// Package code is aiod's code plane: python cells on real Jupyter
// kernels and javascript cells on a node REPL harness, one-off or in
// sessions, answering notebook-shaped outputs.
//
// It owns the [Engine] (sessions and their caps, idle reclaim, timeouts,
// the output cap) and the HTTP surface mounted
// by [Plane]: /v2/code/* and the v1 twins /v1/code/*, /v1/jupyter/* and
// /v1/nodejs/*, which adapt their field names and output shapes onto the
// same engine.
//
// Python runs on `python3 -m ipykernel_launcher` with a connection file
// the engine writes (random loopback ports, a random HMAC-SHA256 key),
// spoken to over ZeroMQ (shell, iopub, stdin, control, heartbeat) with
// the Jupyter messaging protocol 5.3; every received message's signature
// is checked. A cell past its timeout is interrupted (interrupt_request,
// then SIGINT); a kernel that does not stop within the grace is killed
// and its session restarts empty. JavaScript runs in a per-session node
// process speaking JSON lines (harness.js); a timeout kills it and the
// session restarts empty. A javascript cell with a top-level await runs
// as an async function whose last expression is its value; its
// top-level declarations become globals so they persist.
//
// A session runs one cell at a time; up to [MaxQueued] more wait for it
// (further ones get 429). A waiting cell never runs once its request's
// context has ended, and the wait counts against its timeout: one whose
// deadline passes while it waits answers status timeout unrun. A session
// whose runtime cannot start is dropped, freeing its slot.
//
// The daemon's shared kit does the rest: interpreters come from the one
// discovery (aiod/internal/interp, which /v1/capabilities asks too);
// sessions live in a registry with two tiers, kernel and native, each
// with its cap and idle limit, and runs resolve their cwd, account,
// environment and timeout in the shared execution context
// (aiod/internal/sessions); refusals are api kinds answered by the
// routes' one table (aiod/internal/api). Sessions end with
// [Engine.CloseSession], the verb every plane uses.
//
// Under isolation ([Config.Sandbox]) every kernel and node process
// starts inside the daemon's one sandbox, as its account. A kernel's
// private directory and connection file are made in the sandbox's own
// /tmp by a thread acting as that account, and the kernel listens on
// unix sockets there (Jupyter's ipc transport) rather than loopback
// ports, which a sandbox with its own network namespace would hide; the
// daemon reaches them through the sandbox init's /proc root. An
// interpreter the sandbox cannot see (a pyenv under /root, say) is
// refused like a missing one (503), naming it and the variable that
// pins another (AIO_PYTHON_BIN, AIO_NODE_BIN). Without a sandbox, runs
// are on the host over loopback TCP.
//
// On the v1 routes, POST /v1/jupyter/sessions/{id}/interrupt and
// .../restart answer 501, as the published daemon does; a v1 node
// session's max_idle_time (ms)
// replaces the idle limit of the session it creates. The v1 node
// stdin, files and version fields are accepted and ignored.
//
// A run that fails inside the code (an exception, a timeout, a user the
// daemon cannot become) is a 200 with success false; only bad requests
// (422), caps (429), unknown sessions (404) and missing interpreters
// (503; 501 on /v1/jupyter) are error statuses. Every kernel and node
// process runs in its own process group, which [Plane.Close] kills.
package code
