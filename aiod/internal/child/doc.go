// Package child is the daemon's registry of the processes its planes
// start and wait for, and its one view of /proc (stat parsing, scans,
// process trees, environment tags) that the planes kill trees with. The daemon is a child subreaper (commands,
// terminals), so orphans of every plane are reparented to it and must be
// reaped by pid; the registry tells such orphans from the children an
// exec.Cmd still owns, whose exit statuses a reaper must never take.
// [Tail] keeps the end of what a child writes and [ExitText] words its
// exit, for the failures the planes and supervisors report.
package child
