package account

import (
	"os"
	"os/user"
	"strconv"
	"testing"
)

func TestLookup(t *testing.T) {
	if _, err := Lookup("no-such-user-xyz"); err == nil || err.Error() != "no such user: no-such-user-xyz" {
		t.Errorf("unknown: %v", err)
	}
	me, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	a, err := Lookup(me.Username)
	if err != nil || !a.Self || a.Credential() != nil || a.Env()[0] != "HOME="+me.HomeDir {
		t.Errorf("own account: %+v %v", a, err)
	}
	if b, err := Lookup(strconv.Itoa(os.Geteuid())); err != nil || !b.Self {
		t.Errorf("numeric uid: %+v %v", b, err)
	}
	other := "nobody"
	if _, err := user.Lookup(other); err != nil {
		return
	}
	n, err := Lookup(other)
	switch {
	case os.Geteuid() == 0 && (err != nil || n.Self || n.Credential() == nil || n.Credential().Uid != n.UID):
		t.Errorf("root switching to nobody: %+v %v", n, err)
	case os.Geteuid() != 0 && (err == nil || err.Error() != "cannot run as nobody: aiod is running as uid "+strconv.Itoa(os.Geteuid())+" and only root can change identity"):
		t.Errorf("non-root switching: %v", err)
	}
}
