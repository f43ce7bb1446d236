// Package desktop implements the Desktop channel of A2C-SMCP: the
// validation of window:// URIs and the organisation of a Computer's windows
// into the list that client:get_desktop returns.
//
// The package is pure: it performs no I/O, logs nothing, starts no
// goroutines and depends only on the standard library. The Computer lists
// the resources of its MCP servers, reads the window:// ones, builds one
// [Window] per resource and calls [Organize]. Where the specification asks
// the Computer to log a warning, this package reports the condition (a
// boolean, or the dropped part of a URI) and the caller logs it.
//
// # Window URIs
//
// A window URI has the form
//
//	window://<host>[/<segment>]*
//
// and is a pure identifier: it carries no metadata. [ParseURI] accepts it
// and splits it into a host and percent-decoded path segments, each segment
// decoded on its own, so that "c%2Fd" is the single segment "c/d". A query
// or a fragment is not part of a window URI; [ParseURI] drops them and
// returns them in [URI.Query] and [URI.Fragment] so that the Computer can
// log the warning the specification asks for. [URI.String] gives the
// canonical form, which [ParseURI] maps back to the same host and path.
//
// Choices this package makes where the specification is silent:
//
//   - The scheme is compared case-insensitively (RFC 3986 §3.1), as both
//     reference SDKs do; "WINDOW://h" is valid.
//   - The host is kept verbatim (neither decoded nor case-folded). It must
//     be non-empty and an RFC 3986 reg-name: ASCII letters, digits,
//     "-._~!$&'()*+,;=", well-formed %XX escapes, and any non-ASCII
//     character. A user-info part ("a@b"), a port ("h:80") or an IP literal
//     ("[::1]") makes the URI invalid.
//   - A path segment may hold any character except ASCII control
//     characters; "%" must start a well-formed escape, and the decoded
//     segment must be valid UTF-8. Empty segments are dropped, so
//     "window://h/" and "window://h" have the same host and path.
//   - The whole input must be valid UTF-8.
//
// # Resource metadata
//
// Layout metadata comes from the MCP resource, never from the URI:
// priority from annotations.priority (a float in [0, 1], default 0.0,
// compared only within one server, higher first) and fullscreen from
// _meta.fullscreen (a bool, default false). [NormalizePriority],
// [FullscreenFromMeta] and [AudienceWarning] turn the raw values into what
// [Window] holds and report the cases the Computer must warn about.
// annotations.lastModified is passed through by the protocol and plays no
// part in the organisation, so [Window] has no field for it.
//
// # Organisation
//
// [Organize] is the behavioural contract of the specification, step by
// step:
//
//  1. With [Options.Window] set, keep only the windows whose URI equals it
//     exactly (whole string, no prefix or pattern, across all servers, every
//     duplicate kept). The rest of the pipeline runs on what is left.
//  2. With [Options.Size] set and <= 0, return an empty list.
//  3. Drop windows whose URI is not a valid window URI (per [ParseURI];
//     a URI with a query is still valid) and windows with no text
//     contents, which covers both empty contents and blob-only contents.
//  4. Group windows by [Window.Server], the owning server's bundle_id.
//  5. Order the groups: the bundle_ids of [Options.History] from newest to
//     oldest, each once, then the servers absent from the history in
//     lexicographic (byte-wise) bundle_id order.
//  6. Within a group, sort by priority, highest first. Equal priorities keep
//     the order of the input slice (a stable sort).
//  7. If any window of a group is fullscreen, the group contributes only its
//     first fullscreen window, the one earliest in the input slice (not the
//     one with the highest priority); its other windows are dropped. Each
//     group decides this on its own.
//  8. With [Options.Size] > 0, stop once that many entries are collected,
//     counting across all groups in group order.
//  9. Render each window with [Entry].
//
// The result is never nil, so that it encodes as a JSON array.
//
// # Rendering
//
// [Entry] renders a window as its URI, verbatim as the resource declared it
// (including any query, so that the Agent can pass it back as the window
// filter), followed by "\n\n" and the window's texts joined by "\n\n".
// Empty texts are left out; a window whose texts are all empty renders as
// the URI alone. Texts are otherwise copied byte for byte (the Python and
// Rust SDKs additionally trim surrounding white space from the body; this
// package does not).
//
// # Notifications
//
// A Computer tells its office that the desktop changed
// (server:update_desktop) when an MCP server reports a resource list change
// that changes the set of window URIs ([NewSet], [Set.Equal]), or reports an
// update of a window:// resource ([RefreshOnUpdated]). [HostCollisions]
// finds the window hosts that several servers share, which the Computer
// reports as a warning and otherwise ignores.
package desktop
