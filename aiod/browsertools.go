package aiod

// This file backs the MCP browser tools (browser_get_info,
// browser_gui_screenshot, browser_gui_execute_action) with the browser
// and computer-use planes.

import (
	"github.com/a2c-smcp/a2c-go/aiod/browser"
	"github.com/a2c-smcp/a2c-go/aiod/computer"
	"github.com/a2c-smcp/a2c-go/aiod/mcp"
)

// newBrowserTools returns what the MCP browser tools drive; nil: they
// answer isError.
func newBrowserTools(d *Daemon, br *browser.Plane, comp *computer.Plane) mcp.Browser { return nil }
