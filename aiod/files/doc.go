// Package files is aiod's files plane core: one engine for every file
// operation (read, write, edit, replace, stat, list, find, glob, grep,
// search in a file, mkdir, copy, move, delete) and the HTTP routes that
// expose it, /v2/fs/* and their /v1/file/* twins.
//
// The [Engine] is what every caller uses (the HTTP routes here, an MCP tool
// elsewhere): typed requests in, typed results or a *fserr.Error out. The
// request and result types carry the names of the published OpenAPI
// schemas, and their JSON tags are the wire contract.
//
// The [Plane] adapts HTTP to the engine with a table of api.Route
// values: v2 failures answer the status of their error_type (api's one
// kind → status table), v1 failures answer 200 with success:false (the
// fserr.Failed200 override), and malformed input is a serde-worded 422
// on both. Upload, download and tar trees live in aiod/transfer.
//
// Paths: an absolute path is used as given (the workspace is not a
// confinement boundary); a relative one resolves against the workspace; an
// empty path or one holding NUL is invalid_path. Error objects echo the
// path as the client wrote it. The filesystem root is never deleted.
//
// Content: only regular files are read, searched or edited, and every
// open is non-blocking, so a FIFO, a socket or a device is refused at once
// as invalid_target "not a regular file" instead of hanging the request
// (a write or append to an existing character device such as /dev/null
// is the exception, and writes in place).
//
// Writes: a write replaces a file atomically (staged next to it, synced,
// renamed over it) and goes through symbolic links: a chain of links is
// followed to its end, existing or dangling, and the file is written
// there, creating its missing parents, while the links stay links. The
// rename gives the file a new inode, so it breaks hard links: the file's
// other names keep the old content. Appends write in place.
//
// Isolation: with a sandbox (Config.Sandbox), the path work of every
// operation runs in the sandbox's view as its account (through
// sandbox.Sandbox.Do): a path outside the view is not_found, a symbolic
// link resolves against the view's root, so a link in the workspace to a
// host file outside the view is not followed out of it, and a file the
// account may not read (/etc/shadow) is permission_denied. What an
// operation creates belongs to the sandbox account: a request's owner
// (?user=, v1 sudo) is still validated but not applied, and a replace
// does not carry the old file's owner over.
package files
