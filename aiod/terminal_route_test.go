package aiod

import "testing"

// The terminal page and its files are public (static, no secret; the
// socket they open asks for the key), and nothing that imitates them.
func TestTerminalPagePublic(t *testing.T) {
	for _, tc := range []struct {
		path   string
		public bool
	}{
		{"/terminal", true},
		{"/terminal?session_id=x", true},
		{"/terminal/vendor/xterm/xterm.js", true},
		{"/terminalx", false},
		{"/terminal/../v1/shell/exec", false},
		{"/terminal/%2e%2e/v1/shell/ws", false},
		{"/v1/shell/ws", false},
		{"/v1/shell/terminal-url", false},
	} {
		if got := publicRoute(tc.path); got != tc.public {
			t.Errorf("%s: public %v, want %v", tc.path, got, tc.public)
		}
	}
}
