package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// initAccount is the account of Config.UID as init writes it into the
// view: a line of /etc/passwd and one of /etc/group.
type initAccount struct {
	Name string `json:"name"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	Home string `json:"home"`
}

// accountFiles returns the view's /etc/passwd and /etc/group: the host's
// (passwd and group, as read) without any line that has the account's
// name or id, and the account's own line last. Dropping the host's line
// of the same id keeps whoami from naming a host account the sandbox
// happens to share an id with.
func accountFiles(a initAccount, passwd, group []byte) (newPasswd, newGroup []byte) {
	filter := func(content []byte, name string, id int) []byte {
		var out bytes.Buffer
		for line := range bytes.Lines(content) {
			f := bytes.SplitN(bytes.TrimRight(line, "\n"), []byte(":"), 4)
			if len(f) >= 3 && (string(f[0]) == name || string(f[2]) == strconv.Itoa(id)) {
				continue
			}
			out.Write(line)
			if !bytes.HasSuffix(line, []byte("\n")) {
				out.WriteByte('\n')
			}
		}
		return out.Bytes()
	}
	newPasswd = fmt.Appendf(filter(passwd, a.Name, a.UID), "%s:x:%d:%d:%s:%s:/bin/sh\n", a.Name, a.UID, a.GID, a.Name, a.Home)
	newGroup = fmt.Appendf(filter(group, a.Name, a.GID), "%s:x:%d:\n", a.Name, a.GID)
	return newPasswd, newGroup
}

// bindAccount, in init before pivot_root, binds the account's
// /etc/passwd and /etc/group (accountFiles, from the host's) read-only
// over the view's at r (r/etc is the host's /etc bound read-only), with
// bindContent. A target that is not a regular file (a link would lead
// the bind out of the view) is refused.
func bindAccount(r string, a initAccount) error {
	passwd, _ := os.ReadFile("/etc/passwd")
	group, _ := os.ReadFile("/etc/group")
	np, ng := accountFiles(a, passwd, group)
	for _, f := range []struct {
		name    string
		content []byte
	}{{"passwd", np}, {"group", ng}} {
		dst := r + "/etc/" + f.name
		if fi, err := os.Lstat(dst); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("sandbox: the view's /etc/%s is not a file (%v): the account cannot be named", f.name, err)
		}
		if err := bindContent(r, "/etc/"+f.name, f.content); err != nil {
			return err
		}
	}
	return nil
}
