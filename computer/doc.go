// Package computer is the A2C-SMCP Computer runtime: it hosts the MCP
// servers of a configuration (through computer/mcphost) and MCP servers of
// its own process ([LocalServer], such as aiod's sandbox tools), keeps the
// one ExposedToolMapping that both client:get_tools and client:tool_call
// use, joins an office through the signalling server, answers the client:*
// requests of the office's Agent (tool calls with timeouts, cancellation
// and an approval gate; configuration without secrets; resources one page
// at a time), and tells the office when its tools or configuration
// change. Configured and local servers share one dispatch path. It does
// not speak MCP itself, and reconnects to the server with backoff when the
// connection drops.
package computer
