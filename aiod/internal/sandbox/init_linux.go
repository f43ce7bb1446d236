package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// InitArg is the first argument that makes this binary the sandbox's
// init instead of a daemon; the binary's main must hand such a call to
// [Init] before doing anything else.
const InitArg = "__aiod-sandbox-init"

// initSpec is what the daemon tells init, as JSON in argv (it holds no
// secret: the sandbox may read /proc/1/cmdline).
type initSpec struct {
	Root      string `json:"root"`      // an empty host directory to build the view on
	Workspace string `json:"workspace"` // mounted read-write at its own path
	Hostname  string `json:"hostname"`
	Loopback  bool   `json:"loopback"` // bring lo up (a network namespace of its own)
	TmpSize   int64  `json:"tmp_size"` // bytes /tmp and /dev/shm may hold together (tmpfs is memory)
	// Source, Dev and Ino are the workspace's directory as the daemon
	// resolved and checked it; UsernsFD, when not 0, the descriptor of
	// the user namespace to idmap it through (workspace_linux.go).
	Source   string `json:"source"`
	Dev      uint64 `json:"dev"`
	Ino      uint64 `json:"ino"`
	UsernsFD int    `json:"userns_fd,omitempty"`
	// FilterFD, when not 0, is a pipe with the system-call filter,
	// compiled by the daemon (encodeFilter).
	FilterFD int `json:"filter_fd,omitempty"`
	// ReaperFD, when not 0, is the static program init's second stage
	// executes (reaperFile) instead of this binary.
	ReaperFD int `json:"reaper_fd,omitempty"`
	// Account, when set, is the account (Config.UID) the view's
	// /etc/passwd and /etc/group name (account_linux.go).
	Account *initAccount `json:"account,omitempty"`
	// Nameserver, when set, is written as the view's /etc/resolv.conf
	// (resolv_linux.go).
	Nameserver string `json:"nameserver,omitempty"`
	// System, when set, makes the view a whole machine's
	// (system_linux.go): init runs as root of its own user namespace.
	System *initSystem `json:"system,omitempty"`
}

// initEnv is init's whole environment (both stages): one processor is
// all a process that waits needs, and fewer of them mean fewer threads
// and less memory per sandbox.
var initEnv = []string{"GOMAXPROCS=1"}

// systemDirs are the host directories the sandbox sees read-only; a
// symbolic link among them (merged /usr) is recreated as a link.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// devices are the host device nodes the sandbox's /dev holds.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// Init is the sandbox's init: it builds the view described by args[0],
// reports on fd 3 (an empty line on success, else the error), then reaps
// every orphan until its standard input closes (the daemon's Close) or
// the daemon dies (parent-death signal). It is PID 1 of the sandbox's
// PID namespace, so its exit ends every process in the sandbox.
func Init(args []string) int {
	if len(args) == 1 && args[0] == holdArg {
		return holdUserNS()
	}
	if len(args) > 0 && args[0] == stageArg {
		return stage(args[1:])
	}
	if len(args) > 0 && args[0] == setidArg {
		return setid(args[1:])
	}
	runtime.LockOSThread() // chdir and pivot_root below act on this thread's file-system state
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&[]byte("sandbox-init\x00")[0])), 0, 0, 0)
	// Init is never the OOM killer's choice: set here, before anything
	// (and before any privilege is dropped); the daemon's processes do
	// not inherit it (init never forks).
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0)
	report := os.NewFile(3, "report")
	fail := func(err error) int {
		fmt.Fprintf(report, "%s\n", err)
		return 1
	}
	var spec initSpec
	switch {
	case len(args) == 1 && args[0] == confinedArg:
		// Second stage: the view is built and this image was started
		// with no privilege (see reexecConfined). Not dumpable: a
		// process of the sandbox of init's uid (a whole machine's root)
		// cannot ptrace it or open its memory, which the kernel then
		// grants only with CAP_SYS_PTRACE, a capability no sandbox has.
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return fail(fmt.Errorf("sandbox init: %w", err))
		}
	case len(args) != 1 || json.Unmarshal([]byte(args[0]), &spec) != nil:
		return fail(errors.New("sandbox init: bad arguments"))
	default:
		if err := build(spec); err != nil {
			return fail(err)
		}
		return fail(reexecConfined(spec.FilterFD, spec.ReaperFD))
	}
	// Orphans of the sandbox are reparented here (the daemon's subreaper
	// bit does not cross into a child PID namespace). With SIGCHLD
	// ignored the kernel reaps each as it exits (POSIX's SA_NOCLDWAIT
	// rule), so init needs no reaping loop, no signal-watching goroutine
	// and no thread for either. Set before the report: no process of
	// the sandbox exists yet. Init never forks, so no child of its own
	// inherits the setting.
	signal.Ignore(syscall.SIGCHLD)
	fmt.Fprintln(report)
	report.Close()
	_, _ = io.Copy(io.Discard, os.Stdin) // returns when the daemon closes its end
	return 0
}

// build makes the view at spec.Root and pivots into it.
func build(spec initSpec) error {
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("sandbox: %s: %w", what, err)
		}
		return nil
	}
	if err := step("private mounts", unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")); err != nil {
		return err
	}
	if spec.Hostname != "" {
		if err := step("host name", unix.Sethostname([]byte(spec.Hostname))); err != nil {
			return err
		}
	}
	if spec.Loopback {
		if err := step("loopback", loopbackUp()); err != nil {
			return err
		}
	}
	r := spec.Root
	if spec.System != nil {
		// The root and the system directories are overlays; the
		// skeleton and the host's links come with the mask.
		root, err := buildSystem(spec.System, r)
		if err != nil {
			return err
		}
		r = root
	} else if err := viewRoot(r); err != nil {
		return err
	}
	if err := mkdirMount("tmpfs", r+"/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, d := range devices {
		if err := bindFile("/dev/"+d, r+"/dev/"+d); err != nil {
			return err
		}
	}
	// A devpts instance of the sandbox's own: the daemon opens /dev/ptmx
	// in the sandbox's view (from the spawner thread), so a terminal's
	// name exists inside, and the host's terminals are not listed.
	if err := mkdirMount("devpts", r+"/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, ptsOptions(spec.System != nil)); err != nil {
		return err
	}
	for name, target := range map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := step("/dev/"+name, os.Symlink(target, r+"/dev/"+name)); err != nil {
			return err
		}
	}
	// /tmp and /dev/shm: the sandbox's own, writable by its account,
	// one bound for both (tmpfs_linux.go).
	if err := mountTmp(r, spec.TmpSize); err != nil {
		return err
	}
	if err := mkdirMount("proc", r+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	// A whole machine's root is root in its own namespace only: the
	// network namespace (its own) lets root's processes bind low ports
	// and ping, which binding as root outside its user namespace (the
	// spawner's children join it after their start) would not.
	if spec.System != nil && spec.Loopback {
		for k, v := range map[string]string{"net/ipv4/ip_unprivileged_port_start": "0", "net/ipv4/ping_group_range": "0 65535"} {
			if err := os.WriteFile(r+"/proc/sys/"+k, []byte(v), 0); err != nil {
				return step("/proc/sys/"+k, err)
			}
		}
	}
	// The kernel's knobs stay read-only and its secrets hidden, as OCI
	// runtimes do: nothing in the sandbox is root, but a mistake in a
	// check by effective id must not reach the host's kernel settings.
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"} {
		if _, err := os.Lstat(r + p); err != nil {
			continue
		}
		if err := unix.Mount(r+p, r+p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return step("read-only "+p, err)
		}
		if err := unix.Mount("", r+p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return step("read-only "+p, err)
		}
	}
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/kallsyms"} {
		if fi, err := os.Lstat(r + p); err != nil || fi.IsDir() {
			continue
		}
		if err := unix.Mount(r+"/dev/null", r+p, "", unix.MS_BIND, ""); err != nil {
			return step("hide "+p, err)
		}
	}
	if err := mountWorkspace(spec, r); err != nil {
		return err
	}
	if spec.Account != nil {
		if err := bindAccount(r, *spec.Account); err != nil {
			return err
		}
	}
	if spec.Nameserver != "" {
		if err := setResolv(r, spec.Nameserver, spec.System != nil); err != nil {
			return err
		}
	}
	// pivot_root(".", ".") stacks the old root under the new one; the
	// lazy unmount then drops every host mount from this namespace.
	if err := step("chdir", unix.Chdir(r)); err != nil {
		return err
	}
	if err := step("pivot_root", unix.PivotRoot(".", ".")); err != nil {
		return err
	}
	if err := step("detach host root", unix.Unmount(".", unix.MNT_DETACH)); err != nil {
		return err
	}
	if err := step("chdir /", unix.Chdir("/")); err != nil {
		return err
	}
	if spec.System != nil {
		return nil // a whole machine's root is its own, writable
	}
	// The root itself (the directories above the workspace) is read-only.
	return step("read-only root", unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""))
}

// viewRoot makes the view's root at r: a small tmpfs holding the host's
// system directories, bound read-only (links among them recreated).
func viewRoot(r string) error {
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("sandbox: %s: %w", what, err)
		}
		return nil
	}
	if err := step("root", unix.Mount("tmpfs", r, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m")); err != nil {
		return err
	}
	ro := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(d)
			if err == nil {
				err = os.Symlink(target, r+d)
			}
			if err := step("link "+d, err); err != nil {
				return err
			}
			continue
		}
		if !fi.IsDir() {
			continue
		}
		if err := bind(d, r+d, ro); err != nil {
			return err
		}
	}
	return nil
}

// bind mounts src at dst (a directory, created) recursively, then
// remounts it with flags (the remount applies what a bind cannot).
func bind(src, dst string, flags uintptr) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("sandbox: %s: %w", dst, err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("sandbox: bind %s: %w", src, err)
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("sandbox: remount %s: %w", src, err)
	}
	return nil
}

// bindFile binds one device node onto an empty file at dst, read-only:
// the device reads and writes as ever (a read-only mount refuses writes
// to files and directories, not to devices), and its inode, the host's,
// cannot be changed (chmod, chown) through the view.
func bindFile(src, dst string) error {
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", dst, err)
	}
	f.Close()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("sandbox: bind %s: %w", src, err)
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("sandbox: read-only %s: %w", src, err)
	}
	return nil
}

func mkdirMount(src, dst, fstype string, flags uintptr, data string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("sandbox: %s: %w", dst, err)
	}
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("sandbox: mount %s: %w", dst, err)
	}
	return nil
}

// loopbackUp sets IFF_UP on lo, the one interface of a fresh network
// namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var req [unix.IFNAMSIZ + 24]byte
	copy(req[:], "lo")
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		return e
	}
	flags := *(*uint16)(unsafe.Pointer(&req[unix.IFNAMSIZ]))
	*(*uint16)(unsafe.Pointer(&req[unix.IFNAMSIZ])) = flags | unix.IFF_UP | unix.IFF_RUNNING
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		return e
	}
	return nil
}

// ptsOptions are the options of the sandbox's devpts: terminals of
// group tty (5) where that group exists, i.e. not inside the user
// namespace of an unprivileged daemon, which maps only its own ids.
func ptsOptions(system bool) string {
	opts := "newinstance,ptmxmode=0666,mode=0620"
	if system { // a whole machine maps the host's first 65536 ids
		return opts + ",gid=5"
	}
	if b, err := os.ReadFile("/proc/self/gid_map"); err == nil && len(strings.Fields(string(b))) >= 3 && strings.Fields(string(b))[2] == "4294967295" {
		opts += ",gid=5"
	}
	return opts
}
