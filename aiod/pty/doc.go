// Package pty is aiod's terminals plane: long-lived shells on real
// pseudo-terminals, addressed by session id, driven over REST and
// attached over WebSocket.
//
// It owns the [Engine] (terminal sessions: their shell started in a
// session of its own with the PTY as controlling terminal, the retained
// output ring, command execution with completion and exit-code markers,
// the console transcript, timeouts, resize, input, signals, capacity and
// idle reclaim) and the HTTP surface mounted by [Plane]: the v2 routes
// under /v2/pty (REST and the WebSocket attach, durable takeover and
// restore included) and the v1 compatibility routes /v1/shell/*, which
// adapt their field names onto the same engine. It also serves the
// terminal page GET /v1/shell/terminal-url points at (GET /terminal,
// web.go): xterm.js on the v1 shell WebSocket, its files embedded from
// web/ (the emulator in web/vendor is the pinned npm build that
// scripts/xterm.sh copies, checked against its SHA256SUMS by a test).
//
// A command run through exec is typed at the prompt. With bash the
// shell itself reports where the command's output begins (PS0) and
// where it ends, with its exit status (PROMPT_COMMAND), as private OSC
// escape sequences carrying a per-session nonce; with sh the typed line
// prints the same sequences around the command. The plane strips them
// from the stream before anything else sees it. Other shells can be
// attached to but not exec'd into (501).
//
// It is built on the planes' kit: refusals are the shared api kinds,
// answered by api's status table (a full table is a 400 where terminals
// are created, a DELETE of a gone terminal a 200 with success false, as
// the published API has them); routes are api.Route values; shells run
// in the shared execution context (account, cwd check, environment
// without the daemon's secrets) and terminals live in the shared session
// registry (one tier: the cap, the id held while a shell starts,
// eviction of the least recently used reclaimable terminal, idle
// reclaim). A terminal is reclaimable when it is expiring, runs no exec'd
// command and has no socket attached; it decides so under its own lock
// (session.Expire), so a command or socket that comes first keeps it.
//
// Closing a session, signalling it, or [Plane.Close] SIGKILLs the whole
// terminal session: every process of the shell's session id, and
// everything forked below them.
package pty
