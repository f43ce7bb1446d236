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
// what is reported. Creating a watcher with a configuration identical to
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
// one seq for the loss and rescans its tree for new directories; a poll
// or stream crossing that gap, or asking for events older than what is
// kept, is told overflow:true.
//
// Streams (GET …/events) answer 404 before any byte when the watcher is
// unknown. They send "watch_started" first, then "file_change" events
// with the SSE id "{watcher_id}:{seq}", "overflow" where events were lost
// (its data {watcher_id, cursor}: events after cursor, up to the next
// frame, are gone), a keep-alive comment
// every [Config.KeepAlive], and a final "watch_stopped" when the watcher
// is deleted or the plane closes. A reconnecting client resumes after
// its Last-Event-ID (either "{watcher_id}:{seq}" or a bare seq); without
// one the stream starts at ?cursor= (default 0: the kept history).
//
// Status texts, on which the published API is silent: a running watcher
// is "active"; DELETE answers "released" while other subscribers remain
// and "stopped" when the watcher ends.
package watch
