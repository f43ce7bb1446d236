package server

import (
	"strings"
	"testing"
	"time"
)

// TestConfigRefused: New refuses a Config that means nothing, with one
// line naming it; zero stays the default.
func TestConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Path: "no-slash"}, `server: path "no-slash" must be a URL path starting with / (no query, fragment or spaces)`},
		{Config{Path: "/a?b"}, `server: path "/a?b" must be`},
		{Config{Path: "/a b/"}, `server: path "/a b/" must be`},
		{Config{RelayTimeout: -5 * time.Second}, "server: the relay timeout is negative (-5s)"},
		{Config{ToolCallSlack: -1}, "server: the tool call slack is negative (-1ns)"},
		{Config{PingInterval: -time.Second}, "server: the ping interval is negative (-1s)"},
		{Config{PingTimeout: -time.Second}, "server: the ping timeout is negative (-1s)"},
		{Config{BodyIdleTimeout: -time.Second}, "server: the body idle timeout is negative (-1s)"},
		{Config{MaxPayload: -1}, "server: the largest message is negative (-1 bytes)"},
		{Config{MaxRequest: -1}, "server: the largest request is negative (-1 bytes)"},
	} {
		s, err := New(tc.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
		if s != nil {
			t.Errorf("%+v: a server", tc.cfg)
		}
	}
	for _, path := range []string{"", "/", "/hub", "/hub/"} {
		s, err := New(Config{Path: path})
		if err != nil {
			t.Errorf("path %q: %v", path, err)
			continue
		}
		want := path
		switch {
		case path == "":
			want = "/socket.io/"
		case !strings.HasSuffix(path, "/"):
			want += "/"
		}
		if s.cfg.Path != want {
			t.Errorf("path %q became %q, want %q", path, s.cfg.Path, want)
		}
	}
}
