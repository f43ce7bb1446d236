package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// An idmapped mount (Linux 5.12, mount_setattr with MOUNT_ATTR_IDMAP)
// shows a filesystem's owners through a user namespace's mapping: a
// file stored as uid I (inside) appears as uid O (outside) for every
// "I O 1" line, and a file created by O is stored as I. The sandbox
// uses it for a workspace a user owns (a project folder with content):
// the mapping swaps the owner and the sandbox account, and leaves every
// other id as it is, so inside the owner's files are the account's,
// root's stay root's, and on the host nothing changes owner and what
// the account creates belongs to the owner. The mount is nosuid and
// nodev; root's ids are never mapped to anyone.

// holdArg, as the argument of InitArg, makes the binary a holder of a
// user namespace: the mapping of a user namespace is written into a
// process, and its descriptor outlives it.
const holdArg = "hold-userns"

// holdUserNS is the holder: it waits for its standard input to close.
func holdUserNS() int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// swapMap maps a to b and b to a, and every other id (0 to 2^32-2) to
// itself.
func swapMap(a, b int) []syscall.SysProcIDMap {
	if a == b {
		return []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
	}
	lo, hi := min(a, b), max(a, b)
	var m []syscall.SysProcIDMap
	add := func(in, out, n int) {
		if n > 0 {
			m = append(m, syscall.SysProcIDMap{ContainerID: in, HostID: out, Size: n})
		}
	}
	add(0, 0, lo)
	add(lo, hi, 1)
	add(lo+1, lo+1, hi-lo-1)
	add(hi, lo, 1)
	add(hi+1, hi+1, 1<<32-1-(hi+1))
	return m
}

// holder is the program that holds a new user namespace while its
// descriptor is opened: the system's cat, which only reads its standard
// input until it closes, where there is one (its start costs about a
// millisecond; this binary's, tens: every package of it initialises),
// else this binary with holdArg, which does the same.
func holder() (path string, args []string) {
	holderOnce.Do(func() {
		for _, p := range []string{"/usr/bin/cat", "/bin/cat"} {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				holderPath = p
				return
			}
		}
	})
	if holderPath != "" {
		return holderPath, []string{"aiod-sandbox-userns"}
	}
	return Executable, []string{"aiod-sandbox-userns", InitArg, holdArg}
}

var (
	holderOnce sync.Once
	holderPath string
)

// newUserNS returns a descriptor of a new user namespace with the given
// maps: a holder process ([holder]) is started in it, the namespace
// opened, and the holder ended.
func newUserNS(uids, gids []syscall.SysProcIDMap) (*os.File, error) {
	keepR, keepW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer keepW.Close()
	path, args := holder()
	cmd := &exec.Cmd{Path: path, Args: args, Env: []string{}, Dir: "/",
		Stdin: keepR, SysProcAttr: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: uids, GidMappings: gids}}
	err = cmd.Start()
	keepR.Close()
	if err != nil {
		return nil, fmt.Errorf("user namespace: %w", err)
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	keepW.Close()
	_ = cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("user namespace: %w", err)
	}
	return ns, nil
}

// setIDMap idmaps the detached mount tree through the user namespace
// userns.
func setIDMap(tree, userns int) error {
	return unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns)})
}

// idmapFor prepares the idmapping of the workspace that swaps its owner
// (uid, gid) with the account's, and tries it on a detached copy of the
// workspace's mount, so a kernel or filesystem that cannot is found at
// start (EINVAL, EOPNOTSUPP, ENOSYS), not when init mounts it. The
// owner must not be root; a group of root (0) is left unmapped.
func (w *workspace) idmapFor(uid, gid, accUID, accGID int) error {
	if uid == 0 {
		return errors.New("root's files are never mapped to the sandbox account")
	}
	gids := swapMap(gid, accGID)
	if gid == 0 {
		gids = swapMap(accGID, accGID)
	}
	ns, err := newUserNS(swapMap(uid, accUID), gids)
	if err != nil {
		return err
	}
	tree, err := unix.OpenTree(w.fd(), "", unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		ns.Close()
		return fmt.Errorf("open_tree: %w", err)
	}
	// Closing a detached tree that was never attached unmounts it.
	defer unix.Close(tree)
	if err := setIDMap(tree, int(ns.Fd())); err != nil {
		ns.Close()
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
			return fmt.Errorf("the kernel or the filesystem does not support idmapped mounts: %w", err)
		}
		return fmt.Errorf("mount_setattr: %w", err)
	}
	w.userns = ns
	w.idmap = fmt.Sprintf("idmapped: host uid %d gid %d appear as the account's", uid, gid)
	if gid == 0 {
		w.idmap = fmt.Sprintf("idmapped: host uid %d appears as the account's", uid)
	}
	return nil
}
