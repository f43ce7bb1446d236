package commands

import (
	"os"
	"os/user"
	"strings"
	"testing"
)

func TestOwnAccountNeedsNoSwitch(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	h := newHarness(t, Config{}, nil)
	d := h.run(map[string]any{"command": "id -u; echo $USER", "user": u.Username})
	if str(d.Stdout) != u.Uid+"\n"+u.Username+"\n" {
		t.Fatalf("%+v", d)
	}
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "own", "user": u.Username}, nil)
	if os.Getuid() == 0 {
		// Root is the daemon's own account here: no credential switch.
		if d = h.run(map[string]any{"command": "id -u", "user": "root"}); str(d.Stdout) != "0\n" {
			t.Fatalf("%+v", d)
		}
	} else {
		msg := h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "true", "user": "root"})
		if !strings.Contains(msg, "only root can change identity") {
			t.Fatalf("%q", msg)
		}
	}
}
