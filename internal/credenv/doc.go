// Package credenv is the one list of the environment variables that carry
// a credential of this project (the hub's token, the sandbox daemon's API
// key, URLs that may hold passwords, OTLP headers), and the filter that
// keeps them from the processes we start: MCP servers of a Computer, a
// configuration's command inputs, aiod's commands, kernels, browser,
// desktop tools and probes. A child gets one of them only when it is
// given on purpose (an MCP server's own env in the configuration, the
// computer-use worker's key), added after the filter.
package credenv
