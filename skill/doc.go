// Package skill is the A2C-SMCP SKILL channel without the network: skill
// names, SKILL.md frontmatter, the registry of installed skills, the two
// sources a Computer serves (the user's folder and MCP servers that
// publish skill:// resources), the client:get_skill resolution with its
// path sandbox, and the built-in MIME map. The Computer (package
// computer) wires it to the office connection; aiod's sandbox_load_skill
// reads skill folders through it too.
//
// # Names
//
// [ParseName] is the specification's lexer: one segment is a user skill
// ("my-helper"), two a marketplace skill ("acme-audit:audit", even when
// the plugin is called "mcp"), three an MCP skill whose first segment is
// the literal "mcp" ("mcp:<bundle_id>:<skill>"). <skill> and <plugin>
// are strict kebab-case, 1 to 64 bytes ([ValidLeaf]); <bundle_id> is
// checked by smcp.ValidBundleID, so it may start or end with '_' or '-'
// and has no length limit, as the specification allows (ambiguity A6).
// The lexer runs before any registry lookup.
//
// # Frontmatter (ambiguity A1)
//
// [Split] finds the YAML block of a SKILL.md and the bytes served for it
// (total_size and sha256 are computed over those):
//
//   - The first line must be a delimiter line: "---", optionally followed
//     by spaces or tabs. A blank line or anything else first means there
//     is no frontmatter; so does an opening line with no closing one.
//   - A UTF-8 byte order mark before the opening line is accepted and is
//     part of the stripped block.
//   - LF and CRLF line ends are both accepted, on delimiters and inside
//     the block; nothing is normalised in the body.
//   - The closing delimiter line is stripped with its line end: the body
//     starts at the next line. A closing delimiter may end the file
//     (empty body).
//   - Without frontmatter the served SKILL.md is the whole file; such a
//     skill cannot register (name and description are required), so this
//     happens only if the file changes after registration.
//
// Every file named SKILL.md is stripped, the package's own and one in a
// subdirectory alike, as the reference SDK does, so that total_size and
// sha256 agree across implementations.
//
// [ParseMeta] validates the seven fields exactly as the specification
// fixes them (name kebab-case and equal to the package directory's
// name, description 1-1024 characters, compatibility at most 500,
// metadata a mapping, allowed-tools a string or list of strings,
// normalised to a list); any violation leaves the skill out with an
// ERROR log, never a protocol error. tags is passed through when it is
// a list of strings and otherwise dropped with a log, the skill still
// registering (A2CSkillRef.tags is 0.4.0; the Computer omits it for a
// 0.3 office). Other keys are ignored.
//
// # Registry and sources
//
// A [Registry] maps names to package directories; it is the only way from
// a name to a path. Sources keep the order in which they were first seen
// (the user folder first) and each source the order of its own listing:
// that is the discovery order of client:get_skills, with no sorting and
// no deduplication across sources. Within one source a second skill with
// a name already taken is rejected with an ERROR log.
//
// The user folder ([ScanUser]): each child directory (not hidden) with a
// SKILL.md whose frontmatter name equals the directory's name; source
// "user", the bare name, no uri and no version. A tree of skills nested
// deeper is not scanned (that looser layout is [Find]'s, for aiod).
// [Fingerprint] is the cheap stat digest the Computer polls.
//
// An MCP server ([MCPSource]): the skill:// resources of resources/list,
// read page by page to the end (templates are not read, other schemes
// are ignored). A root is skill://<host>/<skill-name> (one path element)
// with _meta.source one of:
//
//   - "resources" (mode C): every resource listed under <root>/ is read
//     with resources/read and written at its path below the package
//     (percent-decoded, checked for traversal, within the size limits);
//     the root itself is never read, and SKILL.md must be <root>/SKILL.md.
//   - "mounted" (mode A): _meta.mount_dir, an absolute directory on this
//     host, is copied (not linked, so the package stays whole inside the
//     staging folder and the sandbox never depends on a foreign tree);
//     symbolic links inside it are not copied.
//   - "archive" (mode B): _meta.archive_uri (http or https) is downloaded
//     with a timeout and a size cap, checked against _meta.archive_sha256
//     when given, and unpacked (_meta.archive_format "tar.gz" or "zip");
//     an entry that is a link or special file, that leaves the package or
//     that exceeds a limit fails the skill. An archive whose only entry
//     is a folder holding SKILL.md is unwrapped.
//
// The package lands in <staging>/<bundle_id>/<frontmatter name>/ (a
// private folder, mode 0700); it is named mcp:<bundle_id>:<name>, source
// mcp:<bundle_id>, uri the root's URI, version the root's _meta.version.
// A skill that fails to materialise is left out with an ERROR log.
//
// # client:get_skill
//
// [Get] follows the specification's order: lexer (4016), registry (4014:
// flat, details.name set, no mcp_server since a skill name need not
// belong to a server; ambiguity A3), the rel_path sandbox of [Resolve]
// (4017 traversal for an absolute path, a "..", a backslash or a symbolic
// link leading out of the package; forbidden for any path element named
// .skillenv, compared without case, whether or not it exists; not_found
// otherwise), the size cap (4017 too_large with details.total_size, no
// handle minted), then body or handle. Only the name .skillenv is
// forbidden (ambiguity A5). Every 4017 carries details.rel_path.
//
// mime_type comes from [MIMEType], a built-in extension map (the
// specification's seven rows and common binary types, the same rows as
// the reference Python SDK; unknown or no extension is
// application/octet-stream, and the extension is compared without case:
// ambiguity A4). [IsText] is the specification's text predicate. A text
// resource of at most the inline budget (default 32 KiB, at most 512 KiB)
// that is valid UTF-8 is answered in body; anything else becomes a blob
// handle, exactly one of the two. sha256 is lower-case hex over the
// served bytes.
package skill
