package account

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"syscall"
)

// Account is a resolved login.
type Account struct {
	Name     string
	UID, GID uint32
	Groups   []uint32
	Home     string
	Username string
	// Self is true for the daemon's own account: nothing to switch to,
	// nothing to chown.
	Self bool
}

// Lookup resolves name (a login, or a numeric uid). Its errors are
// client-facing sentences: `no such user: X`, or `cannot run as X: ...`
// when the daemon cannot become X (not root, not Linux, an unreadable
// account database, unusable ids).
func Lookup(name string) (*Account, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("cannot run as %s: user is supported on Linux only", name)
	}
	u, err := user.Lookup(name)
	if err != nil {
		if _, numeric := strconv.Atoi(name); numeric == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		var unknown user.UnknownUserError
		var unknownID user.UnknownUserIdError
		if errors.As(err, &unknown) || errors.As(err, &unknownID) {
			return nil, errors.New("no such user: " + name)
		}
		return nil, fmt.Errorf("cannot run as %s: the account database cannot be read", name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("cannot run as %s: unusable uid or gid", name)
	}
	a := &Account{Name: name, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir, Username: u.Username}
	switch self := os.Geteuid(); {
	case int(uid) == self:
		a.Self = true
		return a, nil
	case self != 0:
		return nil, fmt.Errorf("cannot run as %s: aiod is running as uid %d and only root can change identity", name, self)
	}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				a.Groups = append(a.Groups, uint32(n))
			}
		}
	}
	return a, nil
}

// Credential is what a process started as the account needs; nil for
// the daemon's own account.
func (a *Account) Credential() *syscall.Credential {
	if a.Self {
		return nil
	}
	return &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: a.Groups}
}

// Env is the account's HOME, USER and LOGNAME.
func (a *Account) Env() []string {
	return []string{"HOME=" + a.Home, "USER=" + a.Username, "LOGNAME=" + a.Username}
}
