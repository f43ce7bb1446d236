// Package market owns the Computer's marketplaces and plugins, as the
// Python and Rust A2C-SMCP SDKs ship them: a marketplace is a git
// repository (tfrobot-marketplace v1) cloned into the SKILL home, whose
// catalog (.tfrobot-plugin/marketplace.json) lists plugins that bundle
// skills and MCP servers. [Manager] adds, lists, refreshes and
// configures marketplaces; [ReadCatalog] reads a catalog. The settings
// the operations write and the derived records are package settings'.
//
// Git is Debian's git, run with GIT_TERMINAL_PROMPT=0 (never a prompt)
// and a 120 s bound per command, so file://, ssh and https remotes all
// work as the user's git does.
//
// Errors a user can act on are [*Error] values carrying the CLI's exit
// code (1: the user's mistake, 2: a clone or refresh failed) and the
// SDKs' exact message.
package market
