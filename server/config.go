package server

import (
	"fmt"
	"strings"
	"time"
	"unicode"
)

// check refuses a Config that cannot mean anything, so that a library
// user gets the same answer as a2c server's flags: a path that is not an
// absolute URL path, a negative size or duration. Zero is never refused
// here: it means the default.
func (c *Config) check() error {
	if c.Path != "" && (!strings.HasPrefix(c.Path, "/") || strings.ContainsAny(c.Path, "?#") ||
		strings.ContainsFunc(c.Path, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })) {
		return fmt.Errorf("server: path %q must be a URL path starting with / (no query, fragment or spaces)", c.Path)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"relay timeout", c.RelayTimeout},
		{"tool call slack", c.ToolCallSlack},
		{"ping interval", c.PingInterval},
		{"ping timeout", c.PingTimeout},
		{"body idle timeout", c.BodyIdleTimeout},
		{"office idle time", c.OfficeIdle},
		{"provision wait", c.ProvisionWait},
	} {
		if d.v < 0 {
			return fmt.Errorf("server: the %s is negative (%v)", d.name, d.v)
		}
	}
	if c.MaxPayload < 0 {
		return fmt.Errorf("server: the largest message is negative (%d bytes)", c.MaxPayload)
	}
	if c.MaxRequest < 0 {
		return fmt.Errorf("server: the largest request is negative (%d bytes)", c.MaxRequest)
	}
	return nil
}
