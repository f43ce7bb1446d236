// Package mcphost owns the Computer's connections to upstream MCP servers:
// one supervised [Upstream] per server, over stdio, SSE or streamable HTTP,
// or, for a server that runs in the same process ([TypeMemory]), over a
// transport that [Spec.Connect] returns for each session. All of them use
// the official MCP Go SDK. An Upstream connects, initializes, lists every
// page of tools, follows tools/list_changed, and restarts with exponential
// backoff after a crash or a lost session; callers see its current tool
// list and call tools through it. It knows nothing of Socket.IO or of
// offices.
package mcphost
