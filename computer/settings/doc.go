// Package settings owns the Computer's layered settings, as the Python
// and Rust A2C-SMCP SDKs lay them out: where each scope's settings.json
// and mcp.json live ([Paths]), which keys each scope may supply and how
// a bad one is reported ([Error]), how the layers merge ([Load],
// [Merged]; [LoadMCP] for the servers), the locked, atomic writes of
// the writable scopes ([Set], [Delete]), and the derived files of the
// SKILL home ([ReadDerived], [WriteDerived]).
//
// # Scopes
//
// From lowest to highest: user ($XDG_CONFIG_HOME/a2c/settings.json, else
// ~/.config/a2c/), project (<cwd>/.tfrobot/settings.json, committed),
// local (<cwd>/.tfrobot/settings.local.json, git-ignored), flag
// (--settings FILE) and policy (the managed directory's
// managed-settings.json, then managed-settings.d/*.json in name order).
// Only user, project and local are written.
//
// # Reading
//
// A layer that is not there is empty. A layer that is not a JSON object
// is empty too, with one [Error] whose field is "<file>", and its file
// is left as it is. Every known key is checked against its type and
// against the scopes that may supply it: a bad key, or a bad item of a
// list or map, is dropped with an [Error] naming the scope, the dotted
// field, the reason and the file; the rest of the layer stands, and
// nothing here stops a Computer from starting. Keys this package does
// not know are kept as they are (a newer SDK's), in the merge and in
// writes.
//
// The merge: objects merge key by key, lists concatenate from the lowest
// scope up without duplicates, and any other value is the highest
// scope's.
//
// # Writing
//
// A write changes one key of one writable scope's file and keeps the
// rest (unknown keys included): a list replaces the list, [Delete]
// removes the key. It holds the sidecar lock <file>.lock (tried without
// blocking, with a backoff from 50 ms to 1 s, ten times, then an error)
// and replaces the file atomically (a temporary file, synced, renamed).
//
// # mcp.json
//
// Each scope's mcp.json is {"servers": {KEY: server}, "inputs": [...]}
// (A2C's own shape, not .mcp.json's); the host program's own servers
// come between local and flag (embed). A higher scope's server replaces
// a lower's whole, and its origin is the highest scope that defines it:
// user, embed, flag and policy are trusted, project and local pass the
// approval gate. A server is validated by package config; one that is
// not valid, or whose "name" is not its key, is dropped with an [Error].
//
// # Derived files
//
// known_marketplaces.json and installed_plugins.json, in the SKILL
// home, are the Computer's own: a header line, version 1, written under
// the lock and atomically. A corrupt one is set aside as
// <name>.corrupt-<UTC time>.bak and read as empty; another version or an
// unknown key is logged and written again.
package settings
