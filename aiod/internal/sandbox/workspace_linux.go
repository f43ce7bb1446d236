package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// workspace is the sandbox's read-write directory, resolved once.
//
// Invariant: every later use goes through dir or is checked against
// dev and ino, never through the path the daemon was given. A check of
// the path as a string (the old rule) let a symbolic link to /, /etc or
// /root pass and then be bind-mounted read-write; and a check followed
// by a second lookup of the same name could be redirected by a link
// swapped in between. So the daemon opens the path once (O_PATH,
// following links), reads the directory it reached from
// /proc/self/fd/N, checks that directory, changes its owner through the
// descriptor, and tells init its resolved path with its device and
// inode: init opens that path refusing every symbolic link
// (RESOLVE_NO_SYMLINKS) and refuses any directory other than the one
// checked, then mounts through its own descriptor (open_tree).
type workspace struct {
	dir      *os.File // O_PATH|O_DIRECTORY descriptor of the resolved directory
	resolved string   // its absolute path, without symbolic links
	dev, ino uint64

	// userns holds a user namespace whose mapping idmaps the workspace
	// for the sandbox account (see idmap_linux.go); nil when none is
	// needed or the machine cannot.
	userns *os.File
	idmap  string // what the idmapping does, for the report
}

// openWorkspace resolves path once and checks both the path as given
// and the directory it leads to (see unsafeWorkspace).
func openWorkspace(path string) (*workspace, error) {
	refuse := func(shown, reason string) error {
		return fmt.Errorf("sandbox: the workspace %s %s; choose a directory of its own with --workspace", shown, reason)
	}
	if reason := unsafeWorkspace(path); reason != "" {
		return nil, refuse(path, reason)
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: workspace %s is not a directory: %w", path, err)
	}
	dir := os.NewFile(uintptr(fd), path)
	resolved, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !filepath.IsAbs(resolved) {
		dir.Close()
		return nil, fmt.Errorf("sandbox: workspace %s: cannot tell which directory it is (%v)", path, err)
	}
	if reason := unsafeWorkspace(resolved); reason != "" {
		dir.Close()
		return nil, refuse(path+" (a link to "+resolved+")", reason)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		dir.Close()
		return nil, fmt.Errorf("sandbox: workspace %s is not a directory", path)
	}
	if testHookWorkspaceChecked != nil {
		testHookWorkspaceChecked(resolved)
	}
	return &workspace{dir: dir, resolved: resolved, dev: st.Dev, ino: st.Ino}, nil
}

// testHookWorkspaceChecked, when set (by tests), runs right after the
// workspace passed its check: a test swaps the directory there.
var testHookWorkspaceChecked func(resolved string)

func (w *workspace) close() {
	if w == nil {
		return
	}
	w.dir.Close()
	if w.userns != nil {
		w.userns.Close()
	}
}

// fd is the descriptor's number, for the *at calls and /proc/self/fd.
func (w *workspace) fd() int { return int(w.dir.Fd()) }

// ownWorkspace makes the workspace writable by the sandbox account when
// that is safe. Nothing is needed when the account owns it or anyone
// may write it. The daemon gives away (chown) only an empty directory
// root owns (one just made for it, as a2c up's); a directory with
// content, owned by a user, keeps its owner on the host and is
// idmapped instead: inside the sandbox the owner's files appear as the
// account's, and what the account creates is the owner's on the host
// (idmap_linux.go). Where the kernel or the filesystem cannot idmap, or
// the owner is root, the account cannot write it and a warning says so.
// With KeepOwner no owner is changed (aiod doctor); an idmapping
// changes none either, so it is still made.
func (s *Sandbox) ownWorkspace() error {
	if s.cfg.System != nil {
		return nil // in the upper layer, idmapped with it (systemTrees)
	}
	w := s.ws
	var st unix.Stat_t
	if err := unix.Fstat(w.fd(), &st); err != nil {
		return fmt.Errorf("sandbox: workspace %s: %w", s.cfg.Workspace, err)
	}
	if int(st.Uid) == s.uid || st.Mode&0o002 != 0 {
		return nil
	}
	if st.Uid == 0 && !s.cfg.KeepOwner && w.empty() {
		if err := unix.Fchownat(w.fd(), "", s.uid, s.gid, unix.AT_EMPTY_PATH); err != nil {
			return fmt.Errorf("sandbox: giving the workspace to %s: %w", s.cfg.User, err)
		}
		return nil
	}
	// Under ReexecUnprivileged the account is the caller: an idmapping
	// could give it no more than the caller's own rights.
	if st.Uid != 0 && !s.userns {
		err := w.idmapFor(int(st.Uid), int(st.Gid), s.uid, s.gid)
		if err == nil {
			s.log.Info("sandbox: the workspace is idmapped: inside, its owner's files are the sandbox account's, and the account's new files are its owner's on the host",
				"workspace", s.cfg.Workspace, "owner_uid", st.Uid, "account", s.cfg.User)
			return nil
		}
		warn := fmt.Sprintf("the workspace %s belongs to uid %d and cannot be idmapped here (%v): the sandbox account %s cannot write it (chown it to %s, or start with an empty one)",
			s.cfg.Workspace, st.Uid, err, s.cfg.User, s.cfg.User)
		s.warnings = append(s.warnings, warn)
		s.log.Warn("sandbox: " + warn)
		return nil
	}
	warn := fmt.Sprintf("the workspace %s belongs to uid %d: the sandbox account %s cannot write it (chown it to %s, or start with an empty one)",
		s.cfg.Workspace, st.Uid, s.cfg.User, s.cfg.User)
	s.warnings = append(s.warnings, warn)
	s.log.Warn("sandbox: " + warn)
	return nil
}

// empty reports whether the workspace has no entries (read through its
// descriptor, not its name).
func (w *workspace) empty() bool {
	f, err := os.Open("/proc/self/fd/" + strconv.Itoa(w.fd()))
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}

// unsafeWorkspace says why ws must not be the sandbox's read-write
// workspace, or "": the root, a top-level system or state directory, a
// home directory (any /home/NAME, /root, the daemon account's), or
// anything under the directories of the system's programs, devices and
// kernel interfaces (/usr, /bin, /sbin, /lib*, /etc, /proc, /sys, /dev,
// /run, /boot). [openWorkspace] applies it to the path as given and to
// the directory the path leads to.
func unsafeWorkspace(ws string) string {
	ws = filepath.Clean(ws)
	if ws == "/" {
		return "is the root of the filesystem"
	}
	if ws == "/root" || ws == "/home" || filepath.Dir(ws) == "/home" {
		return "is a home directory"
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.Clean(home) == ws {
		return "is the daemon account's home directory"
	}
	for _, d := range []string{"/opt", "/proc", "/sys", "/dev", "/run", "/boot", "/var", "/tmp", "/var/tmp", "/var/lib", "/srv", "/mnt", "/media"} {
		if ws == d {
			return "is a system directory"
		}
	}
	top := ws
	if i := strings.IndexByte(ws[1:], '/'); i >= 0 {
		top = ws[:i+1]
	}
	if strings.HasPrefix(top, "/lib") { // /lib, /lib32, /lib64, /libx32, /libexec
		return "is a system directory"
	}
	for _, d := range []string{"/usr", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev", "/run", "/boot"} {
		if ws == d || strings.HasPrefix(ws, d+"/") {
			return "is a system directory"
		}
	}
	return ""
}

// mountWorkspace, in init before pivot_root, mounts the directory the
// daemon checked (spec.Source, with spec.Dev and spec.Ino) read-write at
// r+spec.Workspace, nosuid and nodev, idmapped when spec.UsernsFD names
// a user namespace (closed once used). The source is opened with no
// symbolic link anywhere in its path (it was resolved already) and must
// be the very directory checked: a name swapped since is refused, never
// followed. The mount is made from that descriptor (open_tree), so
// nothing is looked up by name again.
func mountWorkspace(spec initSpec, r string) error {
	ws := filepath.Clean(spec.Workspace)
	if ws == "/" || !filepath.IsAbs(ws) {
		return nil
	}
	if spec.System != nil {
		// The daemon made the tree from the checked directory's
		// descriptor (systemTrees): init, in its user namespace,
		// attaches it.
		if err := os.MkdirAll(r+ws, 0o755); err != nil {
			return fmt.Errorf("sandbox: workspace: %w", err)
		}
		err := unix.MoveMount(spec.System.Workspace, "", unix.AT_FDCWD, r+ws, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(spec.System.Workspace)
		if err != nil {
			return fmt.Errorf("sandbox: workspace: move_mount: %w", err)
		}
		return nil
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, spec.Source, &how)
	if errors.Is(err, unix.ENOSYS) { // before Linux 5.6: the inode check below still holds
		fd, err = unix.Open(spec.Source, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	changed := errors.New("sandbox: the workspace changed while the sandbox started (it is no longer the directory that was checked)")
	if err != nil {
		return fmt.Errorf("%w: %w", changed, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != spec.Dev || st.Ino != spec.Ino {
		return changed
	}
	if err := os.MkdirAll(r+ws, 0o755); err != nil {
		return fmt.Errorf("sandbox: workspace: %w", err)
	}
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if errors.Is(err, unix.ENOSYS) { // before Linux 5.2: a bind of the descriptor itself
		return bind("/proc/self/fd/"+strconv.Itoa(fd), r+ws, uintptr(unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV))
	}
	if err != nil {
		return fmt.Errorf("sandbox: workspace: open_tree: %w", err)
	}
	defer unix.Close(tree)
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE,
		&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}); err != nil {
		return fmt.Errorf("sandbox: workspace: nosuid, nodev: %w", err)
	}
	if spec.UsernsFD > 2 {
		err := setIDMap(tree, spec.UsernsFD)
		unix.Close(spec.UsernsFD) // init keeps nothing it does not need
		if err != nil {
			return fmt.Errorf("sandbox: workspace: idmap: %w", err)
		}
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, r+ws, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("sandbox: workspace: move_mount: %w", err)
	}
	return nil
}
