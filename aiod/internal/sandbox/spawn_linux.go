package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// A sandboxed process must be in the sandbox's cgroup before it runs an
// instruction of its own, or a process that forks at once leaves
// children outside every limit. On cgroup v2 clone3's CLONE_INTO_CGROUP
// did that, but the spawner thread now carries the system-call filter
// its children inherit, and the filter answers clone3 with ENOSYS (its
// flags are behind a pointer, out of the filter's sight). So on v2 the
// child is held instead: it is born traced (PTRACE_TRACEME, from Go's
// SysProcAttr.Ptrace), stops at its exec before the new program's first
// instruction, is moved into the group, and is let go (PTRACE_DETACH,
// no signal). The spawner thread is the tracer (ptrace requests must
// come from it), which is why releaseHeld runs on it.
//
// On v1 nothing changes: a child of the spawner thread is born in the
// pids and cpu groups (the thread joined them), and is moved into the
// memory group once started, with the sweeper catching what forked
// first (cgroups). Holding costs a stop and a wake-up per command,
// which v1 does without; Sandbox.hold turns it on there for the tests.

// holdAtExec makes cmd stop at its exec, for releaseHeld, where that is
// how the process reaches its cgroup; it reports whether it did.
func (s *Sandbox) holdAtExec(cmd *exec.Cmd) bool {
	if s.cg == nil || s.cg.v2 == "" && !s.hold {
		return false
	}
	cmd.SysProcAttr.Ptrace = true
	return true
}

// releaseHeld waits for the held process pid to stop at its exec, puts
// it in the sandbox's groups and lets it run. A process that died first
// is left for its owner's Wait (WNOWAIT: its status is not taken here).
// If the process cannot be placed it is killed: it must not run
// outside its limits.
func (s *Sandbox) releaseHeld(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("sandbox: waiting for a new process to stop at its exec: %w", err)
		}
	}
	if info.Code != cldTrapped && info.Code != cldStopped {
		return nil // it exited or was killed
	}
	placeErr := s.cg.placeNew(pid)
	if placeErr != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	if err := unix.PtraceDetach(pid); err != nil && placeErr == nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return fmt.Errorf("sandbox: releasing a new process: %w", err)
	}
	return placeErr
}

// si_code values of a stopped child (linux/signal.h).
const (
	cldStopped = 5
	cldTrapped = 4
)

// placeNew moves a new process into the sandbox's group (on v2 its one
// group, on v1 the memory group: a child of the spawner thread is born
// in the pids and cpu groups), through the file opened on the host: it
// runs on the spawner thread.
func (c *cgroups) placeNew(pid int) error {
	if c == nil {
		return nil
	}
	for _, f := range c.files.procs {
		if _, err := f.Write([]byte(strconv.Itoa(pid))); err != nil {
			return fmt.Errorf("sandbox: placing a process in the cgroup: %w", err)
		}
	}
	return nil
}

// threadFiles are the cgroup files the spawner thread writes after it
// has entered the sandbox's mount namespace, where /sys does not exist:
// opened on the host beforehand (a write through an open cgroup file is
// checked as the writer, not by path).
type threadFiles struct {
	procs     []*os.File // where placeNew puts a new process: v2's cgroup.procs, v1's memory and freezer cgroup.procs
	baseTasks []*os.File // v1: the daemon's own groups of joinedV1, where leaveThread goes back
}

// openFiles opens c's threadFiles; New calls it on the host.
func (c *cgroups) openFiles() error {
	if c == nil {
		return nil
	}
	open := func(path string) (*os.File, error) {
		f, err := os.OpenFile(path, os.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("sandbox: cgroup: %w", err)
		}
		return f, nil
	}
	if c.v2 != "" {
		f, err := open(filepath.Join(c.v2, "cgroup.procs"))
		if err != nil {
			return err
		}
		c.files.procs = []*os.File{f}
		return nil
	}
	for _, d := range c.dirs(placedV1) {
		f, err := open(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			c.files.close()
			return err
		}
		c.files.procs = append(c.files.procs, f)
	}
	var bases []string
	for _, ctl := range joinedV1 {
		if b, ok := c.base[ctl]; ok && c.v1[ctl] != "" && !contains(bases, b) {
			bases = append(bases, b)
		}
	}
	for _, b := range bases {
		f, err := open(filepath.Join(b, "tasks"))
		if err != nil {
			c.files.close()
			return err
		}
		c.files.baseTasks = append(c.files.baseTasks, f)
	}
	return nil
}

func (t *threadFiles) close() {
	for _, f := range t.procs {
		f.Close()
	}
	t.procs = nil
	for _, f := range t.baseTasks {
		f.Close()
	}
	t.baseTasks = nil
}

// A fork of the daemon that takes the sandbox's uid before its exec (Go's
// SysProcAttr.Credential) is, until the exec, a process a process of the
// sandbox may stop. Go forks with vfork: the spawner thread stays
// suspended in the kernel until the child executes, and the Go runtime,
// which counts that thread as running, cannot stop the world, so the
// first garbage collection then freezes the whole daemon (an adversarial
// pass froze it with kill(-1, SIGSTOP) in a loop). So the fork stays
// root, which no process of the sandbox may signal, and executes setid
// (stage/setid_amd64.S) at once: a static program that takes the
// sandbox's identity, changes to the process's directory and executes
// its program. A process of the sandbox may stop setid, which stops
// that one process; the daemon's start has returned by then. Where
// setidCode does not exist, setid is this binary (setidArg).
//
// The directory, too, is setid's: the fork holds every descriptor of
// the daemon, and a directory such as /proc/self/fd/N of the daemon's
// workspace descriptor (or a link the sandbox turns into one after the
// plane looked) led a command out of the sandbox's view; setid holds
// none of them, and changes to the directory as the account.
//
// An unprivileged daemon (ReexecUnprivileged) runs its sandboxes as its
// own uid: there the fork is that uid too, and a process of the sandbox
// may still stop it; the directory guard holds there as well.

// setidArg, as the argument of InitArg, makes this binary setid (its Go
// form, where setidCode does not exist). Its argument follows: four
// bytes, each 0x80|v: the parent-death signal (0: none), this binary's
// descriptor, the command file's, and the flags (setidKeepGroups); the
// uid and the gid follow. The command file (stageCommand) holds the
// directory ("." for none, changed to after the identity), the program,
// its arguments and its environment; both descriptors are closed before
// the exec. setid's own environment is empty (it is a dynamic program,
// started as root: the request's LD_PRELOAD must not reach it).
const setidArg = "setid"

// setidKeepGroups, in setid's flags, keeps the groups (Credential's
// NoSetGroups: a daemon in a user namespace of its own may not call
// setgroups).
const setidKeepGroups = 1

// setidFile is setidCode in a sealed memory file, made once a process.
var setidFile = sync.OnceValues(func() (*os.File, error) {
	return sealedFile("aiod-setid", stageELF(setidCode), 0o711)
})

// throughSetid makes cmd start as setid, which takes cmd's Credential
// (clearing it from cmd: the fork stays root), changes to cmd's Dir
// (clearing it too: the fork holds every descriptor of the daemon, and
// a Dir such as /proc/self/fd/N, or a link the sandbox turns into one,
// would lead it out of the sandbox's view), and then executes cmd's
// program with cmd's arguments and environment. setid also sets the
// parent-death signal again (a change of identity clears it). It
// returns the files the caller closes once cmd has started.
func throughSetid(cmd *exec.Cmd) ([]*os.File, error) {
	a := cmd.SysProcAttr
	self := 3 + len(cmd.ExtraFiles)
	if self+1 > 0x7f || a.Pdeathsig < 0 || a.Pdeathsig > 0x7f || a.Credential == nil {
		return nil, fmt.Errorf("sandbox: cannot start %s through setid", cmd.Path)
	}
	cred := a.Credential
	uid, gid := strconv.FormatUint(uint64(cred.Uid), 10), strconv.FormatUint(uint64(cred.Gid), 10)
	flags := byte(0x80)
	if cred.NoSetGroups {
		flags |= setidKeepGroups
	}
	if setidCode == nil || forceGoForms {
		exe, err := binaryStage()
		if err != nil {
			return nil, err
		}
		b, err := stageCommand(dirOrDot(cmd.Dir), cmd.Path, cmd.Args, cmd.Environ())
		if err != nil {
			return nil, err
		}
		command, err := sealedFile("aiod-command", b, 0o600)
		if err != nil {
			return nil, err
		}
		ctl := string([]byte{0x80 | byte(a.Pdeathsig), 0x80 | byte(self), 0x80 | byte(self+1), flags})
		cmd.ExtraFiles = append(cmd.ExtraFiles, exe, command)
		cmd.Args = []string{"aiod-setid", InitArg, setidArg, ctl, uid, gid}
		cmd.Path, cmd.Env, cmd.Dir = "/proc/self/fd/"+strconv.Itoa(self), []string{}, ""
		a.Credential = nil
		return []*os.File{command}, nil
	}
	f, err := setidFile()
	if err != nil {
		return nil, err
	}
	ctl := string([]byte{0x80 | byte(a.Pdeathsig), 0x80 | byte(self), flags})
	cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	cmd.Args = append([]string{"aiod-setid", ctl, uid, gid, cmd.Dir, cmd.Path}, cmd.Args...)
	cmd.Path, cmd.Dir = "/proc/self/fd/"+strconv.Itoa(self), ""
	a.Credential = nil
	return nil, nil
}

// dirOrDot is dir, or "." (stay) when empty.
func dirOrDot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// setid is setid's Go form (see setidArg). It returns only on failure,
// with the exit status, after a line on the standard error, as the
// static form writes it.
func setid(args []string) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "sandbox: "+format+"\n", a...)
		return code
	}
	if len(args) != 3 || len(args[0]) != 4 || args[0][0]&0x80 == 0 || args[0][1]&0x80 == 0 || args[0][2]&0x80 == 0 || args[0][3]&0x80 == 0 {
		return fail(1, "cannot take the sandbox's identity: bad arguments")
	}
	sig, self, cmdFD, keepGroups := int(args[0][0]&0x7f), int(args[0][1]&0x7f), int(args[0][2]&0x7f), args[0][3]&setidKeepGroups != 0
	uid, err1 := strconv.ParseUint(args[1], 10, 32)
	gid, err2 := strconv.ParseUint(args[2], 10, 32)
	b, err3 := io.ReadAll(io.NewSectionReader(os.NewFile(uintptr(cmdFD), "command"), 0, 1<<40))
	dir, path, argv, env, err4 := parseCommand(b)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fail(1, "cannot take the sandbox's identity: %v", err)
	}
	unix.Close(self)
	unix.Close(cmdFD)
	// On this thread, which then executes the program: the exec takes
	// its credentials (raw calls: the C library's and Go's own would
	// change every thread's, which is not needed).
	runtime.LockOSThread()
	if err := keepBounding(nil); err != nil {
		return fail(1, "cannot take the sandbox's identity: %v", err)
	}
	for _, c := range []struct{ nr, a0 uintptr }{{unix.SYS_SETGROUPS, 0}, {unix.SYS_SETGID, uintptr(gid)}, {unix.SYS_SETUID, uintptr(uid)}} {
		if c.nr == unix.SYS_SETGROUPS && keepGroups {
			continue
		}
		if _, _, e := unix.RawSyscall(c.nr, c.a0, 0, 0); e != 0 {
			return fail(1, "cannot take the sandbox's identity: %s", errnoText(e))
		}
	}
	if sig != 0 {
		_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(sig), 0, 0, 0)
	}
	if dir != "." {
		if err := unix.Chdir(dir); err != nil {
			return fail(1, "cannot change to directory %s: %s", dir, errnoText(err))
		}
	}
	err := unix.Exec(path, argv, env)
	code := 126
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		code = 127
	}
	return fail(code, "%s: %s", path, errnoText(err))
}

// setidCaps are the capabilities setid needs (its fork is root with the
// spawner thread's bounding set): to empty the bounding set, and to take
// the sandbox's ids.
var setidCaps = []uintptr{unix.CAP_SETPCAP, unix.CAP_SETUID, unix.CAP_SETGID}
