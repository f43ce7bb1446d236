package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestAccountFiles(t *testing.T) {
	a := initAccount{Name: "sandbox", UID: 1000, GID: 1001, Home: "/srv/ws"}
	for _, c := range []struct {
		name, passwd, group, wantPasswd, wantGroup string
	}{
		{"empty", "", "", "sandbox:x:1000:1001:sandbox:/srv/ws:/bin/sh\n", "sandbox:x:1001:\n"},
		{"kept", "root:x:0:0:root:/root:/bin/bash\n", "root:x:0:\n",
			"root:x:0:0:root:/root:/bin/bash\nsandbox:x:1000:1001:sandbox:/srv/ws:/bin/sh\n", "root:x:0:\nsandbox:x:1001:\n"},
		{"same id dropped", "root:x:0:0::/root:/bin/sh\nubuntu:x:1000:1000::/home/ubuntu:/bin/bash", "ubuntu:x:1000:\nadm:x:1001:syslog\n",
			"root:x:0:0::/root:/bin/sh\nsandbox:x:1000:1001:sandbox:/srv/ws:/bin/sh\n", "ubuntu:x:1000:\nsandbox:x:1001:\n"},
		{"same name dropped", "sandbox:x:7:7::/:/bin/sh\n", "sandbox:x:7:\n",
			"sandbox:x:1000:1001:sandbox:/srv/ws:/bin/sh\n", "sandbox:x:1001:\n"},
	} {
		p, g := accountFiles(a, []byte(c.passwd), []byte(c.group))
		if string(p) != c.wantPasswd || string(g) != c.wantGroup {
			t.Errorf("%s: passwd %q group %q", c.name, p, g)
		}
	}
}

func TestAccountConfig(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{UID: 1000, GID: 1000, UserName: "sandbox"}, true},
		{Config{UID: 1000, GID: 0, UserName: "sandbox"}, false},
		{Config{UID: 0, GID: 1000}, false},
		{Config{UID: -1, GID: -1, UserName: "sandbox"}, false},
		{Config{UID: 1 << 32, GID: 5, UserName: "sandbox"}, false},
		{Config{UID: 5, GID: 5, UserName: "a:b"}, false},
		{Config{UID: 5, GID: 5, UserName: "-x"}, false},
		{Config{Name: "box-1.a_b"}, true},
		{Config{Name: "../x"}, false},
		{Config{Name: ".."}, false},
		{Config{Name: strings.Repeat("x", 65)}, false},
	} {
		if err := c.cfg.withDefaults().checkAccount(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}

// TestAccountIDs: a sandbox of explicit ids runs its processes and Do
// threads as them, with no line of the host's account database; inside,
// the account has a name (whoami, id -un, ls -l) and the workspace as
// its home, and owns the workspace, given to it or idmapped.
func TestAccountIDs(t *testing.T) {
	const uid, gid = 23456, 23457
	s, ws := newSandbox(t, Config{UID: uid, GID: gid, UserName: "alice"})
	if name, u, g := s.Account(); name != "alice" || u != uid || g != gid {
		t.Errorf("Account() = %s %d %d", name, u, g)
	}
	if r := s.Report(); r.User != "alice" || r.UID != uid {
		t.Errorf("Report: %s %d", r.User, r.UID)
	}
	out, err := run(t, s, "whoami; id -un; id -u; id -gn; id -g; touch "+ws+"/f; ls -ln "+ws+"/f | cut -d' ' -f3,4; ls -ld "+ws+" | cut -d' ' -f3,4; getent passwd alice | cut -d: -f6")
	want := "alice\nalice\n23456\nalice\n23457\n23456 23457\nalice alice\n" + ws + "\n"
	if err != nil || out != want {
		t.Errorf("inside: %q %v, want %q", out, err, want)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws, "f"), &st); err != nil || st.Uid != uid || st.Gid != gid {
		t.Errorf("owner on the host: %d:%d %v", st.Uid, st.Gid, err)
	}
	var euid, egid int
	_ = s.Do(func() error { euid, egid = syscall.Geteuid(), syscall.Getegid(); return nil })
	if euid != uid || egid != gid {
		t.Errorf("a Do thread runs as %d:%d", euid, egid)
	}
	// The view's account files are read-only mounts of their own.
	if out, err := run(t, s, "grep -E ' /etc/(passwd|group) ' /proc/self/mountinfo | cut -d' ' -f5,6 | cut -d, -f1"); err != nil || out != "/etc/passwd ro\n/etc/group ro\n" {
		t.Errorf("account files: %q %v", out, err)
	}

	// A workspace with a user's content is idmapped to the account.
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "mine"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(full, 1500, 1500); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(full, "mine"), 1500, 1500); err != nil {
		t.Fatal(err)
	}
	s2, err := New(Config{Workspace: full, UID: uid, GID: gid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.ws.userns == nil {
		t.Skip("no idmapped mounts here:", s2.warnings)
	}
	out, err = run(t, s2, "whoami; ls -l "+full+"/mine | cut -d' ' -f3,4")
	if err != nil || out != "sandbox\nsandbox sandbox\n" {
		t.Errorf("idmapped: %q %v", out, err)
	}

	if _, err := New(Config{Workspace: t.TempDir(), UID: uid}, nil); err == nil {
		t.Error("a UID with group 0 was accepted")
	}
}
