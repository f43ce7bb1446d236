package cli

import (
	"strings"
	"testing"
)

// TestBadAllowedHostsAndOrigins: a bad --allowed-host or --allowed-origin
// (or the variable behind it) stops a2c server and a2c up before they
// listen, with one line and exit code 2.
func TestBadAllowedHostsAndOrigins(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  [2]string
		want string
	}{
		{[]string{"server", "--allowed-origin", "app.example"}, [2]string{},
			`a2c server: invalid value "app.example" for flag -allowed-origin: bad allowed origin "app.example": want scheme://host[:port], like https://app.example or http://localhost:3000`},
		{[]string{"server", "--allowed-host", "https://hub.example"}, [2]string{},
			`a2c server: invalid value "https://hub.example" for flag -allowed-host: bad allowed host "https://hub.example": want a host name or address, like sandbox.example or 10.0.0.5`},
		{[]string{"server"}, [2]string{"A2C_ALLOWED_ORIGINS", "null"},
			`a2c server: A2C_ALLOWED_ORIGINS: bad allowed origin "null": want scheme://host[:port], like https://app.example or http://localhost:3000`},
		{[]string{"up", "--listen", "127.0.0.1:0", "--allowed-origin", "*"}, [2]string{},
			`a2c up: invalid value "*" for flag -allowed-origin: bad allowed origin "*": want scheme://host[:port], like https://app.example or http://localhost:3000`},
		{[]string{"up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--workspace", "."}, [2]string{"A2C_ALLOWED_HOSTS", "a.example,*.b.example"},
			`a2c up: A2C_ALLOWED_HOSTS: bad allowed host "*.b.example": want a host name or address, like sandbox.example or 10.0.0.5`},
	} {
		if tc.env[0] != "" {
			t.Setenv(tc.env[0], tc.env[1])
		}
		code, _, stderr := run(tc.args...)
		if code != 2 || stderr != tc.want+"\n" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		if tc.env[0] != "" {
			t.Setenv(tc.env[0], "")
		}
	}
	if code, out, _ := run("server", "-h"); code != 0 || !strings.Contains(out, "-allowed-host") || !strings.Contains(out, "-allowed-origin") {
		t.Errorf("server -h: %d %q", code, out)
	}
}
