// Package transfer is aiod's file transfer plane: streamed uploads, ranged
// and validated downloads, and whole directories as tar streams.
//
// It owns these routes (see [Plane.Mount]):
//
//	POST     /v2/fs/upload, /v1/file/upload     multipart upload, staged and renamed into place
//	GET|HEAD /v2/fs/download, /v1/file/download raw bytes with Range, If-Range, ETag, change_policy
//	GET      /v2/fs/tree                        a directory as an application/x-tar stream
//	PUT      /v2/fs/tree                        a tar body extracted in-process
//
// The same engine serves every caller: the HTTP handlers, the MCP tools
// and the A2C Computer call [Engine.Upload], [Engine.Open],
// [Engine.ExportTree] and [Engine.ImportTree]. Failures are *fserr.Error
// values naming the path as the caller wrote it; the handlers only choose
// how to answer them (status-mapped on /v2, 200 with success false on
// /v1, a bare status on downloads).
//
// Paths are not confined: an absolute path is used as given and a relative
// one resolves against the workspace, because confinement is the
// sandbox's job, not the API's. The tar importer is the exception that
// proves the rule: an archive is untrusted input, so nothing it contains
// may land outside the destination it names.
//
// Under isolation (Config.Sandbox) that job is done here too: every
// lookup, open, creation and rename runs in the sandbox's view as its
// account (sandbox.Sandbox.Do), while content streams outside it through
// the file opened there. A path outside the view is not_found (404), a
// symbolic link resolves against the view's root, so a link in the
// workspace to a host file outside the view is not followed out of it,
// and a file the account may not read (/etc/shadow) is
// permission_denied (403). Uploads and imports land in the view only, and
// what they create belongs to the sandbox account: a request's user is
// validated but not applied, and a replaced file's owner is not carried
// over. An export looks every entry up as the account, so a tree holding
// a file it may not read fails.
package transfer
