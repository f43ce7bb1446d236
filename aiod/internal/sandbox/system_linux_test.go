package sandbox

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// testMask is one mask for the package's tests (building it walks the
// host's /usr).
var testMask = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "aiod-test-mask-")
	if err != nil {
		return "", err
	}
	testMaskDir = dir
	return dir, BuildMask(dir)
})

// testMaskDir is the mask's directory once made; TestMain removes it.
var testMaskDir string

// newMachine starts a whole machine with ids from base.
func newMachine(t *testing.T, base int) (*Sandbox, string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a whole machine needs root")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Fatal("needs nsenter (util-linux)")
	}
	mask, err := testMask()
	if err != nil {
		t.Fatal(err)
	}
	upper := filepath.Join(t.TempDir(), "upper")
	s, ws := newSandbox(t, Config{UID: base, GID: base, UserName: "root", Network: NetworkNone,
		System: &System{IDs: base, Upper: upper, Mask: mask}})
	return s, ws, upper
}

// debPackage builds a Debian package that installs /usr/bin/NAME, a
// script printing "hello from NAME", and returns its path.
func debPackage(t *testing.T, dir, name string) string {
	t.Helper()
	root := filepath.Join(dir, name)
	for _, d := range []string{"DEBIAN", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	control := fmt.Sprintf("Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: test <t@example.com>\nDescription: a test package\n", name)
	if err := os.WriteFile(filepath.Join(root, "DEBIAN/control"), []byte(control), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin", name), []byte("#!/bin/sh\necho hello from "+name+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	deb := filepath.Join(dir, name+".deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	return deb
}

// containerMask is containerCaps as /proc's Cap lines write a set.
func containerMask() uint64 {
	var m uint64
	for _, c := range containerCaps {
		m |= 1 << c
	}
	return m
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// TestSystem: a whole machine's processes are root inside its own user
// namespace (the range's first id outside); its system is writable, the
// writes land in its upper layer with the ids they have inside, and the
// host's files are untouched; what other accounts of the host cannot
// read is not there; root binds port 80 and installs a Debian package;
// it still cannot mount, load modules or change the kernel's settings.
func TestSystem(t *testing.T) {
	const base = 2_100_000_000
	s, ws, upper := newMachine(t, base)
	statusBefore := fileSum(t, "/var/lib/dpkg/status")
	deb := debPackage(t, ws, "a2c-test-hello")
	cases := []struct {
		name, script, want string
	}{
		{"root inside", "id -u; id -g; cat /proc/self/uid_map | tr -s ' '", fmt.Sprintf("0\n0\n 0 %d 65536\n", base)},
		{"write /usr", "echo x > /usr/local/bin/made-inside && chown 42:42 /usr/local/bin/made-inside && stat -c %u:%g /usr/local/bin/made-inside", "42:42\n"},
		{"edit /etc/hosts", "echo '10.1.2.3 inside.test' >> /etc/hosts && grep -c inside.test /etc/hosts", "1\n"},
		{"masked", "ls /etc/shadow 2>&1; cat /etc/passwd | head -1", "ls: cannot access '/etc/shadow': No such file or directory\nroot:x:0:0:root:/root:/bin/bash\n"},
		{"port 80", "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 80)); print(\"bound\")'", "bound\n"},
		{"dpkg", "dpkg -i " + deb + " >/dev/null && a2c-test-hello && dpkg-query -W -f '${Status}\\n' a2c-test-hello", "hello from a2c-test-hello\ninstall ok installed\n"},
		{"no mount", "mount -t tmpfs none /mnt 2>&1 || echo refused", "refused"},
		{"no sysctl", "echo 0 > /proc/sys/kernel/panic 2>&1 || echo refused", "refused"},
		{"no userns", "unshare -U true 2>&1 || echo refused", "refused"},
		{"no netfilter", "nft list tables 2>&1 || echo refused", "refused"},
		{"no btrfs ioctl", "python3 -c 'import fcntl,os; fd=os.open(\"/\", os.O_RDONLY); fcntl.ioctl(fd, 0x5000940e, bytes(1024))' 2>&1 | tail -1", "Operation not permitted"},
		// Root's capabilities are a container's, bounded: no exec, set-id
		// program or file capability gives one back; the stage leaves
		// no descriptor behind (3 is ls's own).
		{"capabilities", "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status",
			fmt.Sprintf("CapPrm:\t%016x\nCapEff:\t%016x\nCapBnd:\t%016x\nCapAmb:\t%016x\n", containerMask(), containerMask(), containerMask(), 0)},
		{"descriptors", "echo fds=$(ls /proc/self/fd | wc -l)", "fds=4\n"},
		{"no ptrace of init", "python3 -c 'import ctypes; l=ctypes.CDLL(None, use_errno=True); print(l.ptrace(16, 1, 0, 0), ctypes.get_errno())'", "-1 1\n"},
		{"host devices", "chmod 600 /dev/null 2>&1 || echo refused; echo x > /dev/null && echo written", "refused\nwritten\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(t, s, c.script)
			if !strings.Contains(out, c.want) {
				t.Errorf("%s: %q %v, want %q", c.script, out, err, c.want)
			}
		})
	}
	// The programs a new process starts as (nsenter, then this binary
	// as the stage) are loaded from the host's files, not the
	// sandbox's: a preload the sandbox sets is tried by the command
	// only, never by a program that runs before root's capabilities are
	// bounded (or while the process is still in the host's view).
	if out, err := run(t, s, "echo /nonexistent-a2c-preload.so > /etc/ld.so.preload"); err != nil {
		t.Fatalf("%q %v", out, err)
	}
	out, _ := runArgv(t, s, "/bin/true")
	if n := strings.Count(out, "nonexistent-a2c-preload.so"); n != 1 {
		t.Errorf("the preload was tried %d times, want 1 (true, not nsenter or the stage):\n%s", n, out)
	}
	if out, err := run(t, s, "rm /etc/ld.so.preload"); err != nil {
		t.Fatalf("%q %v", out, err)
	}
	// A program the machine does not have: the stage says so, with the
	// shell's status.
	out, err := runArgv(t, s, "/no/such/program", "x")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 127 || out != "sandbox: /no/such/program: No such file or directory\n" {
		t.Errorf("a missing program: %q %v, want exit status 127", out, err)
	}
	// A terminal is the sandbox's own.
	master, tty, err := s.OpenPTY()
	if err != nil {
		t.Fatal(err)
	}
	tcmd := exec.Command("/bin/sh", "-c", "tty")
	tcmd.Stdin, tcmd.Stdout, tcmd.Stderr = tty, tty, tty
	tcmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := s.Wrap(tcmd, tcmd.Start)(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	buf := make([]byte, 64)
	k, _ := master.Read(buf)
	_ = tcmd.Wait()
	master.Close()
	if !strings.HasPrefix(string(buf[:k]), "/dev/pts/") {
		t.Errorf("tty inside: %q", buf[:k])
	}
	// The user namespace is the range's (owned by its first id, not by
	// the host's root): its budgets are the range's, and the nsenter
	// stage runs as that id.
	nsf, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", s.cur.init.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var owner uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, nsf.Fd(), 0xb704, uintptr(unsafe.Pointer(&owner))); e != 0 || owner != base { // NS_GET_OWNER_UID
		t.Errorf("the namespace's owner: %d %v, want %d", owner, e, base)
	}
	nsf.Close()
	// The processes are the range's on the host (once nsenter has
	// taken the new process in: it says so, then waits).
	cmd := exec.Command("/bin/sh", "-c", "echo in; exec sleep 5")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Wrap(cmd, cmd.Start)(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 3)
	if _, err := stdout.Read(line); err != nil || string(line) != "in\n" {
		t.Fatalf("%q %v", line, err)
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if want := fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", base, base, base, base); !strings.Contains(string(status), want) {
		t.Errorf("a process's host ids: %s", status)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// The writes are in the upper layer, as inside; the host is untouched.
	var fst syscall.Stat_t
	if err := syscall.Stat(upper+"/usr/upper/local/bin/made-inside", &fst); err != nil || fst.Uid != LayerIDs+42 || fst.Gid != LayerIDs+42 {
		t.Errorf("the upper layer's file: %+v %v, want ids %d", fst, err, LayerIDs+42)
	}
	// What root inside makes set-user-id, or gives a file capability, is
	// root's inside only: on the host's disk its owner, and the
	// capability's root, is LayerIDs, never the host's root (0).
	for _, dir := range []string{"/usr/local/bin", ws} {
		script := "cp /bin/true " + dir + "/suid && chmod 4755 " + dir + "/suid && cp /bin/true " + dir + "/capped && " +
			"python3 -c 'import os,struct; os.setxattr(\"" + dir + "/capped\", \"security.capability\", struct.pack(\"<IIIII\", 0x02000001, 1<<7, 0, 0, 0))' && stat -c '%u %a' " + dir + "/suid"
		if out, err := run(t, s, script); out != "0 4755\n" {
			t.Fatalf("%s: %q %v", dir, out, err)
		}
		onHost := upper + "/usr/upper/local/bin"
		if dir == ws {
			onHost = ws
		}
		if err := syscall.Stat(onHost+"/suid", &fst); err != nil || fst.Uid != LayerIDs || fst.Mode&syscall.S_ISUID == 0 {
			t.Errorf("%s/suid on the host: uid %d mode %o %v, want uid %d", onHost, fst.Uid, fst.Mode, err, LayerIDs)
		}
		xattr := make([]byte, 64)
		n, err := syscall.Getxattr(onHost+"/capped", "security.capability", xattr)
		// A namespace's capability (revision 3) names its root: LayerIDs.
		if err != nil || n != 24 || binary.LittleEndian.Uint32(xattr) != 0x03000001 || binary.LittleEndian.Uint32(xattr[20:]) != LayerIDs {
			t.Errorf("%s/capped's capability on the host: %x %v, want revision 3 with root %d", onHost, xattr[:max(n, 0)], err, LayerIDs)
		}
	}
	for _, p := range []string{"/usr/local/bin/made-inside", "/usr/bin/a2c-test-hello"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is on the host", p)
		}
	}
	if _, err := os.Stat(upper + "/usr/upper/bin/a2c-test-hello"); err != nil {
		t.Errorf("the package's file is not in the upper layer: %v", err)
	}
	if fileSum(t, "/var/lib/dpkg/status") != statusBefore {
		t.Error("the host's dpkg status changed")
	}
	if b, _ := os.ReadFile("/etc/hosts"); strings.Contains(string(b), "inside.test") {
		t.Error("the host's /etc/hosts changed")
	}
}

// TestNsenterStageNotDumpable: the nsenter stage of a whole machine's
// new process (the range's id, still in the host's mount namespace)
// runs a program it can execute but not read, which the kernel marks
// not dumpable: a process of the sandbox, of the same id, cannot ptrace
// it or touch its memory.
func TestNsenterStageNotDumpable(t *testing.T) {
	const ids = 2_100_065_536
	s, _, _ := newMachine(t, ids)
	fi, err := os.Stat("/proc/self/fd/" + strconv.Itoa(s.nsenter))
	if err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("the nsenter copy: %v %v", fi.Mode(), err)
	}
	d, err := unix.Dup(s.nsenter)
	if err != nil {
		t.Fatal(err)
	}
	copyFile := os.NewFile(uintptr(d), "nsenter-copy")
	defer copyFile.Close()
	as := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: ids, Gid: ids, Groups: []uint32{}}}
	run := exec.Command("/proc/self/fd/3", "--version")
	run.ExtraFiles, run.SysProcAttr = []*os.File{copyFile}, as
	if out, err := run.CombinedOutput(); err != nil || !strings.Contains(string(out), "util-linux") {
		t.Errorf("the range's id cannot run the copy: %q %v", out, err)
	}
	read := exec.Command("/bin/sh", "-c", "cat /proc/self/fd/3 >/dev/null 2>&1 && echo readable || echo unreadable")
	read.ExtraFiles, read.SysProcAttr = []*os.File{copyFile}, as
	if out, _ := read.CombinedOutput(); strings.TrimSpace(string(out)) != "unreadable" {
		t.Errorf("the range's id reads the copy: %q", out)
	}
}
