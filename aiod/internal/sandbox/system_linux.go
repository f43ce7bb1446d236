package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
)

// A whole machine (Config.System): root inside, the system on layers.
//
// # Root inside
//
// Init is born in a user namespace of its own (with the other
// namespaces, which the user namespace then owns) mapping 0..65535 to
// System.IDs..IDs+65535 on the host: root inside is IDs outside, and
// nothing of the host is root's inside. The namespace is made by a
// thread whose effective ids are IDs (ownedInit), so IDs owns it: the
// kernel counts the sandbox's per-user budgets to IDs, and a process of
// uid IDs, with no privilege on the host, has every capability in it.
//
// A process of the sandbox joins that namespace on its way in: the
// spawner thread (in the sandbox's network, PID, IPC and UTS
// namespaces, but the host's mount and user ones, since a thread of a
// threaded process cannot join a user namespace) starts the host's
// nsenter (util-linux, a C program, single-threaded) as uid IDs, loaded
// from the host's files with an empty environment; it joins the user
// namespace and becomes root there, then executes the stage
// (stage_linux.go), still from the host's mount namespace, which joins
// the mount one, bounds root's capabilities to a container's
// (containerCaps) and executes the command. At no moment is a process
// of the sandbox the host's root, nothing it runs before the command
// comes from the sandbox's files, and the command never holds more
// than containerCaps; the filter bounds the calls they reach.
//
// # Layers
//
// The view's root and each of systemTargets are overlays (overlayfs,
// mounted by init as root of its namespace, with userxattr). Their lower
// layers are the host's directories, read-only, and above them the mask
// (BuildMask): a whiteout for every file or directory of the host that
// other accounts cannot read (/etc/shadow, private keys), since root
// inside would read what the host's root can. Their upper layer is the
// sandbox's own (System.Upper). Every layer is an idmapped mount made by
// the daemon: the host's ids 0..65535 appear as the sandbox's, so root's
// files are root's inside, and what the sandbox writes is stored with
// the ids it has inside (a layer does not depend on the range of the
// sandbox that wrote it: a snapshot can be another sandbox's lower
// layer).

// varTargets are the parts of /var a package manager needs; the rest of
// the view's /var starts empty (the host's logs and state are not the
// sandbox's).
var varTargets = []string{"/var/lib/dpkg", "/var/lib/apt", "/var/cache/apt", "/var/cache/debconf"}

// systemTargets are the host directories a whole machine has as layers:
// the system directories that are directories (not merged /usr links)
// and varTargets, those the host has.
func systemTargets() []string {
	var out []string
	for _, d := range append(append([]string{}, systemDirs...), varTargets...) {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// layerName names a target's upper layer and its tree ("/var/lib/dpkg":
// "var-lib-dpkg"; the view's root: "root").
func layerName(target string) string {
	return strings.ReplaceAll(strings.Trim(target, "/"), "/", "-")
}

// skeleton is the view's root directory as the mask holds it: the
// directories every machine has, with their modes, besides the targets.
var skeleton = []struct {
	path string
	mode fs.FileMode
}{
	{"root", 0o700}, {"home", 0o755}, {"srv", 0o755}, {"mnt", 0o755}, {"media", 0o755}, {"run", 0o755},
	{"tmp", 0o1777}, {"dev", 0o755}, {"proc", 0o555}, {"sys", 0o555}, {".tmpfs", 0o755},
	{"var", 0o755}, {"var/lib", 0o755}, {"var/cache", 0o755}, {"var/log", 0o755}, {"var/tmp", 0o1777},
	{"var/spool", 0o755}, {"var/mail", 0o2775}, {"var/local", 0o755}, {"var/opt", 0o755}, {"var/backups", 0o755},
}

// BuildMask makes dir the mask of this host's system (see the comment at
// the top of this file): the skeleton of a machine's root, the host's
// links among the system directories (merged /usr), and below each
// target a whiteout (a 0/0 character device, overlayfs's mark of a
// removed entry) for every entry other accounts cannot read: a file
// without o+r, a directory without o+rx (its content is not walked), a
// device, a socket or a pipe. The directories leading to a whiteout are
// made with the host's modes and owners. dir is removed first. It needs
// root, and takes about a second for a Debian /usr.
func BuildMask(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sandbox: mask: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sandbox: mask: %w", err)
	}
	for _, d := range skeleton {
		if err := os.Mkdir(filepath.Join(dir, d.path), 0); err != nil {
			return fmt.Errorf("sandbox: mask: %w", err)
		}
		if err := os.Chmod(filepath.Join(dir, d.path), d.mode); err != nil {
			return fmt.Errorf("sandbox: mask: %w", err)
		}
	}
	for _, d := range systemDirs {
		if fi, err := os.Lstat(d); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(d)
			if err == nil {
				err = os.Symlink(target, filepath.Join(dir, d))
			}
			if err != nil {
				return fmt.Errorf("sandbox: mask: %w", err)
			}
		}
	}
	for _, t := range systemTargets() {
		if err := mirrorDirs(dir, t); err != nil {
			return err
		}
		err := filepath.WalkDir(t, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil // gone, or unreadable to root: nothing to hide
			}
			fi, err := e.Info()
			if err != nil {
				return nil
			}
			m := fi.Mode()
			hide := false
			switch {
			case m&fs.ModeSymlink != 0:
			case m.IsDir():
				hide = m.Perm()&0o005 != 0o005
			case m.IsRegular():
				hide = m.Perm()&0o004 == 0
			default:
				hide = true
			}
			if !hide {
				return nil
			}
			if err := mirrorDirs(dir, filepath.Dir(path)); err != nil {
				return err
			}
			if err := unix.Mknod(filepath.Join(dir, path), unix.S_IFCHR, 0); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("sandbox: mask: whiteout %s: %w", path, err)
			}
			if m.IsDir() {
				return filepath.SkipDir
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// mirrorDirs makes host directory hostDir and its parents in the mask
// at dir, with the host's modes and owners (the top layer's directory
// is what the view shows).
func mirrorDirs(dir, hostDir string) error {
	var chain []string
	for p := filepath.Clean(hostDir); p != "/"; p = filepath.Dir(p) {
		chain = append(chain, p)
	}
	slices.Reverse(chain)
	for _, p := range chain {
		dst := filepath.Join(dir, p)
		if fi, err := os.Lstat(dst); err == nil && fi.IsDir() {
			continue
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("sandbox: mask: %w", err)
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if err := os.Mkdir(dst, 0); err != nil {
			return fmt.Errorf("sandbox: mask: %w", err)
		}
		if st != nil {
			if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
				return fmt.Errorf("sandbox: mask: %w", err)
			}
		}
		if err := os.Chmod(dst, fi.Mode().Perm()|fi.Mode()&(fs.ModeSticky|fs.ModeSetgid)); err != nil {
			return fmt.Errorf("sandbox: mask: %w", err)
		}
	}
	return nil
}

// initSystem is what init needs to build a whole machine's view: the
// descriptors of the detached, idmapped trees the daemon made (init, in
// its user namespace, may attach them but could not make them).
type initSystem struct {
	Upper     int            `json:"upper"`
	Mask      int            `json:"mask"`
	Lowers    map[string]int `json:"lowers"` // by target
	Workspace int            `json:"workspace"`
}

// systemTrees makes the trees of initSystem: the sandbox's upper layer
// (read-write), the mask and the host's targets (read-only), all
// idmapped through a user namespace with the sandbox's mapping, nosuid
// and nodev; and the workspace's (idmapped as the workspace decided, or
// not). The caller passes files to init and closes them after.
func (s *Sandbox) systemTrees() (spec *initSystem, files []*os.File, err error) {
	sys := s.cfg.System
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			files = nil
		}
	}()
	// Two mappings: the host's layers are read with their own ids (k on
	// disk is k inside), the machine's own with LayerIDs+k.
	idmap := []syscall.SysProcIDMap{{ContainerID: 0, HostID: sys.IDs, Size: SystemIDs}}
	ns, err := newUserNS(idmap, idmap)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	defer ns.Close()
	own := []syscall.SysProcIDMap{{ContainerID: LayerIDs, HostID: sys.IDs, Size: SystemIDs}}
	ownNS, err := newUserNS(own, own)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	defer ownNS.Close()
	if err := os.MkdirAll(sys.Upper, 0o700); err != nil {
		return nil, nil, fmt.Errorf("sandbox: upper layer: %w", err)
	}
	// The layer's top is root's inside (init makes its parts there).
	if err := os.Lchown(sys.Upper, LayerIDs, LayerIDs); err != nil {
		return nil, nil, fmt.Errorf("sandbox: upper layer: %w", err)
	}
	tree := func(path string, attr uint64, userns int) (*os.File, error) {
		dirfd, name, flags := unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE
		if path == s.cfg.Workspace { // the checked directory, by its descriptor
			dirfd, name, flags = s.ws.fd(), "", flags|unix.AT_EMPTY_PATH
		}
		fd, err := unix.OpenTree(dirfd, name, uint(flags))
		if err != nil {
			return nil, fmt.Errorf("sandbox: %s: open_tree: %w", path, err)
		}
		f := os.NewFile(uintptr(fd), path) // closing a tree never attached unmounts it
		a := &unix.MountAttr{Attr_set: attr | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if userns >= 0 {
			a.Attr_set |= unix.MOUNT_ATTR_IDMAP
			a.Userns_fd = uint64(userns)
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, a); err != nil {
			f.Close()
			return nil, fmt.Errorf("sandbox: %s: idmapped mount: %w", path, err)
		}
		return f, nil
	}
	spec = &initSystem{Lowers: map[string]int{}}
	add := func(f *os.File) int {
		files = append(files, f)
		return len(files) - 1 // an index: the caller turns it into init's descriptor
	}
	f, err := tree(sys.Upper, 0, int(ownNS.Fd()))
	if err != nil {
		return nil, nil, err
	}
	spec.Upper = add(f)
	if f, err = tree(sys.Mask, unix.MOUNT_ATTR_RDONLY, int(ns.Fd())); err != nil {
		return nil, nil, err
	}
	spec.Mask = add(f)
	for _, t := range systemTargets() {
		if f, err = tree(t, unix.MOUNT_ATTR_RDONLY, int(ns.Fd())); err != nil {
			return nil, nil, err
		}
		spec.Lowers[t] = add(f)
	}
	// The workspace is stored as the upper layer is (in the pool, it is
	// in it): with the ids it has inside shifted by LayerIDs, through
	// the same mapping, so no id of the host (its root's, 0, least of
	// all) can own a file of it. An empty one of the host's root is
	// given to root inside.
	var st unix.Stat_t
	if err := unix.Fstat(s.ws.fd(), &st); err == nil && st.Uid == 0 && s.ws.empty() {
		if err := unix.Fchownat(s.ws.fd(), "", LayerIDs, LayerIDs, unix.AT_EMPTY_PATH); err != nil {
			return nil, nil, fmt.Errorf("sandbox: workspace: %w", err)
		}
	}
	if f, err = tree(s.cfg.Workspace, 0, int(ownNS.Fd())); err != nil {
		return nil, nil, err
	}
	spec.Workspace = add(f)
	return spec, files, nil
}

// offset turns the indexes of systemTrees' files into init's
// descriptors, the files being passed from descriptor first on.
func (sp *initSystem) offset(first int) {
	sp.Upper += first
	sp.Mask += first
	sp.Workspace += first
	for t, i := range sp.Lowers {
		sp.Lowers[t] = i + first
	}
}

// buildSystem, in init (root of its user namespace), makes the whole
// machine's root on r: a tmpfs at r holds the trees (attached under
// r/.layers) and the root overlay at r/root, with an overlay on each
// target; it returns r/root, where the rest of the view is built. The
// staging tmpfs goes with the host's root at pivot_root; the overlays
// keep their layers.
func buildSystem(sys *initSystem, r string) (string, error) {
	if err := unix.Mount("tmpfs", r, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return "", fmt.Errorf("sandbox: staging: %w", err)
	}
	layers := r + "/.layers"
	attach := func(fd int, name string) (string, error) {
		dst := layers + "/" + name
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return "", fmt.Errorf("sandbox: %s: %w", name, err)
		}
		err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(fd)
		if err != nil {
			return "", fmt.Errorf("sandbox: attaching %s: %w", name, err)
		}
		return dst, nil
	}
	upper, err := attach(sys.Upper, "upper")
	if err != nil {
		return "", err
	}
	mask, err := attach(sys.Mask, "mask")
	if err != nil {
		return "", err
	}
	overlay := func(at, name string, lowers ...string) error {
		u, w := upper+"/"+name+"/upper", upper+"/"+name+"/work"
		for _, d := range []string{u, w} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("sandbox: layer %s: %w", name, err)
			}
		}
		opts := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + u + ",workdir=" + w + ",userxattr"
		if err := os.MkdirAll(at, 0o755); err != nil {
			return fmt.Errorf("sandbox: %s: %w", at, err)
		}
		if err := unix.Mount("overlay", at, "overlay", 0, opts); err != nil {
			return fmt.Errorf("sandbox: overlay %s: %w", name, err)
		}
		return nil
	}
	root := r + "/root"
	if err := overlay(root, "root", mask); err != nil {
		return "", err
	}
	targets := make([]string, 0, len(sys.Lowers))
	for t := range sys.Lowers {
		targets = append(targets, t)
	}
	slices.Sort(targets) // a parent before what it holds
	for _, t := range targets {
		lower, err := attach(sys.Lowers[t], "lower-"+layerName(t))
		if err != nil {
			return "", err
		}
		if err := overlay(root+t, layerName(t), mask+t, lower); err != nil {
			return "", err
		}
	}
	return root, nil
}

// ownedInit starts cmd (init, with CLONE_NEWUSER and its maps) from the
// calling, locked thread while its effective ids are ids, so the new
// user namespace is owned by ids, not by the host's root. The thread
// keeps its capabilities meanwhile (SECBIT_NO_SETUID_FIXUP), which
// writing a map of 65536 ids needs, and its saved ids stay root's, so it
// is root again after; both are the thread's own (raw system calls),
// never the process's.
func ownedInit(cmd *exec.Cmd, ids int) error {
	const secbitNoSetuidFixup = 1 << 2 // linux/securebits.h
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secbitNoSetuidFixup, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: securebits: %w", err)
	}
	restore := func() error {
		_, _, e1 := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), 0, ^uintptr(0))
		_, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), 0, ^uintptr(0))
		err := unix.Prctl(unix.PR_SET_SECUREBITS, 0, 0, 0, 0)
		if e1 != 0 || e2 != 0 || err != nil {
			// The thread cannot be itself again: the caller fails the
			// instance, and the thread ends with its goroutine.
			return fmt.Errorf("sandbox: taking root back after starting init: %v %v %v", e1, e2, err)
		}
		return nil
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), uintptr(ids), ^uintptr(0)); e != 0 {
		return errors.Join(fmt.Errorf("sandbox: setresgid: %w", e), restore())
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(ids), ^uintptr(0)); e != 0 {
		return errors.Join(fmt.Errorf("sandbox: setresuid: %w", e), restore())
	}
	err := child.Start(cmd, cmd.Start)
	if rerr := restore(); rerr != nil {
		return rerr
	}
	return err
}

// containerCaps are root's capabilities inside a whole machine (in its
// own user namespace only): the set container runtimes give a
// container by default.
var containerCaps = []uintptr{unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FSETID, unix.CAP_FOWNER, unix.CAP_MKNOD,
	unix.CAP_NET_RAW, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETFCAP, unix.CAP_SETPCAP, unix.CAP_NET_BIND_SERVICE,
	unix.CAP_SYS_CHROOT, unix.CAP_KILL, unix.CAP_AUDIT_WRITE}

// openNsenter makes Sandbox.nsenter: a copy of the host's nsenter in a
// sealed memory file of mode 0711. The stage that runs it as the range's
// id (throughNsenter) then cannot read its own program, which makes the
// kernel mark it not dumpable: a process of the sandbox, of the same
// uid, cannot ptrace it, read or write its memory while it is still in
// the host's mount namespace.
//
// The copy is made once a process (nsenterCopy); each sandbox holds a
// descriptor of it of its own.
func openNsenter() (int, error) {
	fd, err := nsenterCopy()
	if err != nil {
		return -1, err
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 1000)
	if err != nil {
		return -1, fmt.Errorf("sandbox: nsenter: %w", err)
	}
	return high, nil
}

// nsenterCopy is the sealed copy of openNsenter, made once.
var nsenterCopy = sync.OnceValues(func() (int, error) {
	p, err := exec.LookPath("nsenter")
	if err != nil {
		return -1, errors.New("sandbox: a whole machine needs nsenter (Debian util-linux) on the host")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return -1, fmt.Errorf("sandbox: nsenter: %w", err)
	}
	fd, err := unix.MemfdCreate("nsenter", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("sandbox: nsenter: %w", err)
	}
	defer unix.Close(fd) // its high copy is kept
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			return -1, fmt.Errorf("sandbox: nsenter: %w", err)
		}
		b = b[n:]
	}
	if err := unix.Fchmod(fd, 0o711); err != nil {
		return -1, fmt.Errorf("sandbox: nsenter: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		return -1, fmt.Errorf("sandbox: nsenter: %w", err)
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 1000)
	if err != nil {
		return -1, fmt.Errorf("sandbox: nsenter: %w", err)
	}
	return high, nil
})

// closeNsenter closes Sandbox.nsenter, if open.
func (s *Sandbox) closeNsenter() {
	if s.nsenter >= 0 {
		unix.Close(s.nsenter)
		s.nsenter = -1
	}
}

// throughNsenter makes cmd start as the host's nsenter, from the
// spawner thread, which is in the sandbox's namespaces but the mount one
// and the user one: nsenter is born there as uid IDs (no privilege on
// the host), is loaded from the host's files (the sandbox's writable
// /usr is not its), and has an empty environment (no LD_PRELOAD or
// other variable of the request reaches it; it has no working directory
// of the sandbox). It joins the sandbox's user namespace, which IDs
// owns (by a descriptor of the instance's, passed as an extra file: no
// PID is looked up), becomes root there and executes this binary as the
// stage (stage_linux.go), still from the host's files, which joins the
// mount namespace, changes to cmd's directory inside, bounds root's
// capabilities to containerCaps and executes cmd's program with cmd's
// arguments and environment.
//
// It returns the files it added to cmd (the caller closes them once cmd
// has started); the stage closes them in the child.
func (s *Sandbox) throughNsenter(cmd *exec.Cmd, inst *instance) ([]*os.File, error) {
	exe, err := stageFile()
	if err != nil {
		return nil, err
	}
	inst.nsMu.RLock()
	var files []*os.File
	for _, name := range []string{"user", "mnt"} {
		fd, ok := inst.ns[name]
		if !ok {
			inst.nsMu.RUnlock()
			for _, f := range files {
				f.Close()
			}
			return nil, errEnded
		}
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			inst.nsMu.RUnlock()
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		files = append(files, os.NewFile(uintptr(d), name))
	}
	inst.nsMu.RUnlock()
	first := 3 + len(cmd.ExtraFiles)
	dir := cmd.Dir
	if dir == "" {
		dir = "/"
	}
	// nsenter is executed by its own descriptor's path (a copy of it,
	// since a program between, setid, may run first), which the stage
	// closes with the others.
	ctl, err := stageControl([5]int{first, first + 1, first + 2, first + 3, first + 4})
	var command, nsenter *os.File
	if err == nil {
		var b []byte
		if b, err = stageCommand(dir, cmd.Path, cmd.Args, cmd.Environ()); err == nil {
			command, err = sealedFile("aiod-command", b, 0o600)
		}
	}
	if err == nil {
		var d int
		if d, err = unix.FcntlInt(uintptr(s.nsenter), unix.F_DUPFD_CLOEXEC, 3); err == nil {
			nsenter = os.NewFile(uintptr(d), "nsenter")
		} else {
			command.Close()
		}
	}
	if err != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	files = append(files, command, nsenter)
	cmd.ExtraFiles = append(cmd.ExtraFiles, files[0], files[1], exe, command, nsenter)
	args := []string{"nsenter", "--user=/proc/self/fd/" + strconv.Itoa(first), "--", "/proc/self/fd/" + strconv.Itoa(first+2)}
	if goStage() {
		args = append(args, InitArg, stageArg)
	}
	cmd.Args = append(args, ctl)
	cmd.Path = "/proc/self/fd/" + strconv.Itoa(first+4)
	cmd.Env, cmd.Dir = []string{}, ""
	// As the range's first id, which owns the namespace (ownedInit): no
	// privilege on the host, every one inside once joined; never the
	// host's root.
	ids := uint32(s.cfg.System.IDs)
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: ids, Gid: ids, Groups: []uint32{}}
	return files, nil
}

// OwnsTerminals reports whether the sandbox's terminals must be opened
// with OpenPTY (a whole machine's spawner is not in its mount namespace,
// where its devpts is).
func (s *Sandbox) OwnsTerminals() bool { return s != nil && s.cfg.System != nil }

// OpenPTY opens a terminal pair in the sandbox's own devpts, as its
// account (a Do thread): the master, and the terminal, opened from the
// master (TIOCGPTPEER), whose name is its /dev/pts path inside.
func (s *Sandbox) OpenPTY() (master, tty *os.File, err error) {
	err = s.Do(func() error {
		m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
			unix.Close(m)
			return err
		}
		n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
		if err != nil {
			unix.Close(m)
			return err
		}
		t, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
		if e != 0 {
			unix.Close(m)
			return e
		}
		master, tty = os.NewFile(uintptr(m), "/dev/ptmx"), os.NewFile(t, "/dev/pts/"+strconv.Itoa(n))
		return nil
	})
	return master, tty, err
}
