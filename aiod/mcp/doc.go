// Package mcp is aiod's Model Context Protocol endpoint: the ten built-in
// sandbox tools, each a thin adapter over the engine of the HTTP plane that
// does the same work, the loopback upstreams of EXTRA_MCP_SERVERS, and the
// two ways of reaching them: POST /mcp (stateless JSON-RPC as the daemon
// documents it, or the streamable-HTTP transport for clients that open a
// session) and an in-memory transport for a Computer in the same process.
package mcp
