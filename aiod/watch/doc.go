// Package watch is aiod's watch plane ("listeners"): file watchers over
// inotify, their event history, and the HTTP routes that expose them,
// /v2/watch/* and their /v1/file/watch/* twins.
//
// The [Engine] owns every watcher, one shared inotify instance (so 128
// watchers never run into the per-user inotify instance limit), the
// goroutine that drains that instance, and one goroutine per watcher
// that turns raw inotify records into [FileWatchEvent]s. [Plane] adapts
// HTTP to the engine; the v1 routes decode their own field layout and
// call the same engine methods.
//
// Watchers: a watcher watches a directory (recursively by default: every
// subdirectory at start and every new one as it appears; a new
// directory is scanned when it is added, so files made in it before the
// watch took hold are reported as created) or a single file (its parent
// directory is watched and only that name is reported). Paths matching
// the exclude globs (the defaults, or exactly the list a request gives)
// are neither watched nor reported; include_patterns, when given, limit
// what is reported. A recursive walk does not descend into pseudo
// filesystems (proc, sysfs, devtmpfs, devpts, cgroup, debugfs, tracefs,
// …: told by the device's type in /proc/self/mountinfo, read at each
// create); a path on one is watched itself, nothing below it. One watcher
// watches at most [Config.MaxWatchDirs] directories (10,000): past them it
// runs on without descending further, logs that once, and its create
// answers with a message saying so (the published result has no field
// for it). The walk takes the shared inotify lock per directory, never
// across the tree, so other watchers' events flow meanwhile. Creating a watcher with a configuration identical to
// a running one shares it (reused:true, one more subscriber); DELETE
// releases one subscriber and the watcher stops when none remain.
//
// Events: each watcher numbers its events from 1 (seq) and keeps the
// last [Config.Retention] of them (10,000). Within the debounce window
// repeated writes (or chmods) of one path coalesce into one event;
// creates, removes and renames are never dropped, and events keep their
// order across paths. A move inside the tree is one rename event with
// old_path; a move out is a remove, a move in a create. When events are
// lost (the kernel queue overflowed, IN_Q_OVERFLOW) the watcher skips
// one seq for the loss (one for a run of losses) and rescans its tree for
// new directories, once per burst and at most once a second; the rescan
// re-adds watches and reads directories, which queue no inotify records,
// so it cannot overflow the queue in turn. A poll or stream crossing that
// gap, or asking for events older than what is kept, is told
// overflow:true.
//
// Polls: limit 1–1000 and timeout 0–60 s, anything else a 400. A cursor
// past the latest seq (a client that kept a cursor across a restart, say)
// counts as the latest, once, before the poll waits: the events that come
// next are answered.
//
// Streams (GET …/events) answer 404 before any byte when the watcher is
// unknown. They send "watch_started" first, then "file_change" events
// with the SSE id "{watcher_id}:{seq}", "overflow" where events were lost
// (its data {watcher_id, cursor}: events after cursor, up to the next
// frame, are gone), a keep-alive comment
// every [Config.KeepAlive], and a final "watch_stopped" when the watcher
// is deleted or the plane closes. A reconnecting client resumes after
// its Last-Event-ID (either "{watcher_id}:{seq}" or a bare seq); without
// one the stream starts at ?cursor= (default 0: the kept history). Either
// past the latest seq starts at the latest (watch_started says which).
//
// Isolation: with a sandbox (Config.Sandbox) every path the plane
// touches is resolved in the sandbox's view as its account (through
// sandbox.Sandbox.Do): the create's lookup, the walks, every
// inotify_add_watch and the stat behind an event's size, mtime and
// inode. A path outside the view is not_found, even through a symbolic
// link in the workspace; a directory the account may not read is
// permission_denied; a directory only the view has (its own /tmp) can be
// watched. Pseudo filesystems are told from the view's mount table.
//
// Status texts, on which the published API is silent: a running watcher
// is "active"; DELETE answers "released" while other subscribers remain
// and "stopped" when the watcher ends.
package watch
