package sandbox

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Probe reads what the machine allows. It changes nothing.
func Probe() Machine {
	_, userns := userNSHost()
	m := Machine{Root: os.Geteuid() == 0 && !userns, Cgroup: cgroupVersion(), Landlock: landlockABI()}
	if m.Cgroup == "" {
		m.Cgroup = "none"
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) != "0" {
		m.UserNamespaces = true
		if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
			m.UserNamespaces = false
		}
	}
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT}
	if fd, err := unix.Openat2(unix.AT_FDCWD, "/", &how); err == nil {
		unix.Close(fd)
		m.Openat2 = true
	}
	return m
}
