// Package computer is aiod's computer-use plane: /v2/computer/* and its
// two v1 aliases (/v1/browser/actions, /v1/display/record). The desktop
// itself is driven by a separate worker process (the computer-use worker,
// reached at AIO_COMPUTER_USE_URL); this plane forwards each request to
// it unchanged (method, path, query, body; status, headers and body back)
// and answers the documented 503 when the worker cannot be reached. It
// also reads the worker's /capabilities for capabilities.computer.
package computer
