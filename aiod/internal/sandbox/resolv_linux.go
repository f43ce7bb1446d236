package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// resolvConf is the view's /etc/resolv.conf naming ns, its one resolver.
func resolvConf(ns netip.Addr) []byte {
	return []byte("# aiod: this sandbox's resolver (its egress link's gateway)\nnameserver " + ns.String() + "\n")
}

// setResolv makes the view's /etc/resolv.conf name ns alone: written in
// a whole machine's /etc (its own, writable: root may edit it), bound
// over the host's in any other view (bindResolv).
func setResolv(r, ns string, system bool) error {
	if !system {
		return bindResolv(r, ns)
	}
	addr, err := netip.ParseAddr(ns)
	if err != nil {
		return fmt.Errorf("sandbox: nameserver %q: %w", ns, err)
	}
	if err := os.Remove(r + "/etc/resolv.conf"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sandbox: /etc/resolv.conf: %w", err)
	}
	if err := os.WriteFile(r+"/etc/resolv.conf", resolvConf(addr), 0o644); err != nil {
		return fmt.Errorf("sandbox: /etc/resolv.conf: %w", err)
	}
	return nil
}

// bindResolv, in init before pivot_root, makes the view's
// /etc/resolv.conf (r/etc is the host's /etc, read-only) name ns alone.
//
// When the host's is a regular file, a file of the view's root tmpfs is
// bound over it (as bindAccount does). When it is a symbolic link (a
// host with systemd-resolved links it to /run/systemd/resolve/...), the
// link is followed, at most 8 times, within the view: a target in a
// system directory must be a regular file there, and is bound over; a
// target in no directory the view binds (/run) is created in the root
// tmpfs, so the host's link finds it. Nothing of the host changes.
func bindResolv(r, ns string) error {
	addr, err := netip.ParseAddr(ns)
	if err != nil {
		return fmt.Errorf("sandbox: nameserver %q: %w", ns, err)
	}
	content := resolvConf(addr)
	target := "/etc/resolv.conf"
	for range 8 {
		fi, err := os.Lstat(r + target)
		switch {
		case err == nil && fi.Mode().IsRegular():
			return bindContent(r, target, content)
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(r + target)
			if err != nil {
				return fmt.Errorf("sandbox: %s: %w", target, err)
			}
			if !filepath.IsAbs(link) {
				link = filepath.Join(filepath.Dir(target), link)
			}
			target = filepath.Clean(link)
			continue
		case errors.Is(err, fs.ErrNotExist):
			top := "/" + strings.SplitN(strings.TrimPrefix(target, "/"), "/", 2)[0]
			if top == "/" || slices.Contains(systemDirs, top) || slices.Contains([]string{"/dev", "/proc", "/tmp"}, top) {
				return fmt.Errorf("sandbox: /etc/resolv.conf leads to %s, which the view cannot hold", target)
			}
			if err := os.MkdirAll(r+filepath.Dir(target), 0o755); err != nil {
				return fmt.Errorf("sandbox: %s: %w", target, err)
			}
			if err := os.WriteFile(r+target, content, 0o644); err != nil {
				return fmt.Errorf("sandbox: %s: %w", target, err)
			}
			return nil
		default:
			return fmt.Errorf("sandbox: /etc/resolv.conf leads to %s: %v", target, err)
		}
	}
	return errors.New("sandbox: /etc/resolv.conf: too many links")
}

// bindContent binds content, read-only, over the regular file r+target:
// written in the view's root tmpfs, bound, and removed there (the bind
// keeps it).
func bindContent(r, target string, content []byte) error {
	src := r + "/.bind-" + filepath.Base(target)
	if err := os.WriteFile(src, content, 0o644); err != nil {
		return fmt.Errorf("sandbox: %s: %w", target, err)
	}
	defer os.Remove(src)
	if err := unix.Mount(src, r+target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("sandbox: bind %s: %w", target, err)
	}
	if err := unix.Mount("", r+target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("sandbox: read-only %s: %w", target, err)
	}
	return nil
}
