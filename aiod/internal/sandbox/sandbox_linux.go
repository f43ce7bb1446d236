package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
)

// Executable is the binary started as the sandbox's init (with
// [InitArg]). Tests whose binary dispatches InitArg in TestMain may keep
// the default.
var Executable = "/proc/self/exe"

// sandboxSeq numbers the sandboxes of this process.
var sandboxSeq atomic.Uint64

// doThreads is how many threads at most serve [Sandbox.Do] from the
// instance's pool. They are started on demand (none at start), so an
// idle sandbox costs its daemon one OS thread, the spawner: a pool of
// hundreds of sandboxes would otherwise hold five times as many.
const doThreads = 4

// Sandbox is one running sandbox. Its methods are safe for concurrent
// use; a nil *Sandbox is isolation "none".
type Sandbox struct {
	cfg      Config
	log      *slog.Logger
	env      atomic.Pointer[[]string] // SetEnv's variables
	uid, gid int                      // the account, as the daemon's user namespace sees it
	hostUID  int                      // the account's uid on the host
	userns   bool                     // the daemon runs in a user namespace of its own (ReexecUnprivileged)
	cg       *cgroups                 // nil: rlimits only
	// spawners counts the spawner goroutines still running: Close waits
	// for them before it closes the cgroup files their last step
	// (leaveThread) writes to.
	spawners sync.WaitGroup
	ws       *workspace
	warnings []string
	// nsenter is, for a whole machine, a descriptor (close-on-exec, at
	// 1000 or above, so no child's descriptor shuffle lands on it) of
	// the host's nsenter, which takes each new process into the
	// sandbox's user namespace and hands it to the stage
	// (system_linux.go, stage_linux.go); -1 otherwise.
	nsenter int

	scopeErr atomic.Value // string: why the host's abstract sockets stay reachable

	mu     sync.Mutex
	cur    *instance
	closed bool
	stop   chan struct{} // closed by Close; ends the sweeper

	doSlots chan struct{} // one per thread Do may use at once (see acquire)
	hold    bool          // hold every new process at its exec (spawn_linux.go); tests set it on cgroup v1

	// gate orders starts against Pause and Resume (pause_linux.go): Wrap
	// holds it for reading from its check of paused to the new
	// process's placement in every group; Pause, Resume and Close take
	// it for writing, so a start is either wholly before a freeze or
	// refused. Lock order: gate, then mu.
	gate   sync.RWMutex
	paused atomic.Bool // written under gate (writing), read anywhere

	started chan struct{} // Wrap placed a process (buffer 1); monitor sweeps
}

// instance is one life of the sandbox: an init and the threads that
// joined its namespaces. If init dies (the OOM killer may pick it), the
// next use starts a new instance.
type instance struct {
	init  *exec.Cmd
	keep  *os.File      // init's standard input: closing it ends init
	dir   string        // the host directory init built the view on
	spawn chan func()   // run on the spawner thread
	do    chan func()   // run on an idle Do thread of the pool
	done  chan struct{} // closed when init has exited (and was reaped)
	quit  chan struct{} // closed by end: the instance's threads stop
	ended bool          // end has run (Sandbox.mu)
	// doMu guards doN, how many pool threads serve do (at most
	// doThreads; started as calls find none idle).
	doMu sync.Mutex
	doN  int
	// ns holds init's namespaces (by name: ipc, uts, net, pid, mnt) and
	// root its root directory, opened once when init is ready: a thread
	// that joins later, or a path resolved later, never goes through a
	// PID that init's death may have freed for another process.
	//
	// nsMu guards both against the instance's end: a thread joining the
	// view (enter) or an open through root holds it for reading, and
	// closeNS takes it for writing, so it waits for them and then sets
	// both to nil, which a later reader sees and refuses. Without it
	// a thread could join through a descriptor that end had closed and
	// another open had reused, or find no namespace and stay on the
	// host (TestInstanceEndWhileEntering).
	nsMu sync.RWMutex
	ns   map[string]int
	root *os.File
}

// errEnded is the answer to a use of an instance whose namespaces are
// closed (it ended while the caller was on its way in).
var errEnded = errors.New("sandbox: the sandbox ended; try again")

// errNeedRoot is returned by New when the daemon is not root.
var errNeedRoot = machineError{errors.New("isolation namespaces needs aiod to run as root, or a machine that allows unprivileged user namespaces")}

// New starts a sandbox with cfg and returns it once its view is built.
// The caller owns it and must Close it.
func New(cfg Config, log *slog.Logger) (*Sandbox, error) {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.checkNetwork(); err != nil {
		return nil, err
	}
	if err := cfg.checkAccount(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 { // root, or root of ReexecUnprivileged's user namespace
		return nil, errNeedRoot
	}
	// A descriptor the daemon inherited without close-on-exec (from a
	// shell, a supervisor) would pass into every sandboxed process, and
	// a directory descriptor leads out of any view. Go opens everything
	// close-on-exec; this covers what it did not open.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return nil, fmt.Errorf("sandbox: marking inherited descriptors close-on-exec: %w", err)
	}
	var uid, gid, hostUID int
	h, userns := userNSHost()
	if userns {
		// An unprivileged daemon in a user namespace of its own
		// (ReexecUnprivileged): the only account there is the caller,
		// mapped to root, and sandbox processes run as it. The sandbox
		// hides the host from them; it cannot give them less than the
		// caller's own rights on the host.
		hostUID = h
		if u, err := user.LookupId(strconv.Itoa(h)); err == nil {
			cfg.User = u.Username
		} else {
			cfg.User = strconv.Itoa(h)
		}
	} else if cfg.UID != 0 {
		// Ids of the caller's choosing: no account database is asked,
		// and the name is the view's own (see Config.UID).
		uid, gid, hostUID = cfg.UID, cfg.GID, cfg.UID
		cfg.User = cfg.UserName
	} else {
		u, err := user.Lookup(cfg.User)
		if err != nil {
			return nil, fmt.Errorf("sandbox account %q: %w", cfg.User, err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		if uid == 0 {
			return nil, fmt.Errorf("sandbox account %q is root; name an unprivileged account", cfg.User)
		}
		hostUID = uid
	}
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil || cfg.Workspace == "" {
		return nil, fmt.Errorf("sandbox: workspace %q must be a directory", cfg.Workspace)
	}
	cfg.Workspace = ws
	s := &Sandbox{cfg: cfg, log: log, uid: uid, gid: gid, hostUID: hostUID, userns: userns, stop: make(chan struct{}), started: make(chan struct{}, 1),
		doSlots: make(chan struct{}, doThreads+doSpill), nsenter: -1}
	if cfg.System != nil && userns {
		return nil, errors.New("sandbox: a whole machine needs aiod to run as root on the host")
	}
	if s.ws, err = openWorkspace(ws); err != nil {
		return nil, err
	}
	if err := s.ownWorkspace(); err != nil {
		s.ws.close()
		return nil, err
	}
	// One group per sandbox, named by the daemon's pid (so a later daemon
	// can tell a dead one's leftovers) and a sequence number (tests run
	// several sandboxes in one process).
	// A pool names its sandboxes (Config.Name).
	suffix := cfg.Name
	if suffix == "" {
		suffix = strconv.FormatUint(sandboxSeq.Add(1), 10)
	}
	name := "aiod-sandbox-" + strconv.Itoa(os.Getpid()) + "-" + suffix
	if s.cg, err = newCgroups(cfg, name); err != nil {
		if cfg.Name != "" && errors.Is(err, os.ErrExist) {
			s.ws.close()
			return nil, fmt.Errorf("sandbox: a sandbox named %q exists already", cfg.Name)
		}
		s.cg = nil
		s.warnings = append(s.warnings, "cgroups unavailable ("+err.Error()+"): limits fall back to per-process rlimits and --cpus is not enforced")
		log.Warn("sandbox: cgroups unavailable; limits fall back to rlimits", "err", err)
	}
	if err := s.cg.openFiles(); err != nil {
		s.cg.remove()
		s.ws.close()
		return nil, err
	}
	if cfg.System != nil {
		if s.nsenter, err = openNsenter(); err != nil {
			s.cg.remove()
			s.ws.close()
			return nil, err
		}
	}
	inst, err := s.start()
	if err != nil {
		s.cg.remove()
		s.ws.close()
		s.closeNsenter()
		return nil, err
	}
	s.cur = inst
	if s.cg != nil {
		go s.monitor()
	}
	return s, nil
}

// removeStaleDirs removes the empty host directories that sandboxes of
// dead daemons built their views on (named aiod-sandbox-<pid>-*; a
// SIGKILLed daemon cannot remove its own).
func removeStaleDirs() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && ofDeadDaemon(e.Name()) {
			_ = os.Remove(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}

// ofDeadDaemon reports whether name is a sandbox's (a view directory or
// a cgroup, aiod-sandbox-<pid>-...) whose daemon has died.
func ofDeadDaemon(name string) bool {
	rest, ok := strings.CutPrefix(name, "aiod-sandbox-")
	pid, _, _ := strings.Cut(rest, "-")
	n, err := strconv.Atoi(pid)
	return ok && err == nil && n != os.Getpid() && unix.Kill(n, 0) == unix.ESRCH
}

// start creates an instance: init in fresh namespaces, the spawner
// thread and the Do threads.
func (s *Sandbox) start() (*instance, error) {
	removeStaleDirs()
	root, err := os.MkdirTemp("", "aiod-sandbox-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	inst := &instance{dir: root, spawn: make(chan func()), do: make(chan func()), done: make(chan struct{}),
		quit: make(chan struct{})}
	ready := make(chan error, 1)
	s.spawners.Add(1)
	go func() {
		defer s.spawners.Done()
		s.spawner(inst, ready)
	}()
	if err := <-ready; err != nil {
		os.Remove(root)
		return nil, err
	}
	// The way out, before anything runs inside; from this goroutine, not
	// the spawner's thread, whose children would be born in the sandbox.
	if s.cfg.Attach != nil {
		if err := s.cfg.Attach(inst.init.Process.Pid); err != nil {
			s.end(inst)
			return nil, fmt.Errorf("sandbox: its network: %w", err)
		}
	}
	return inst, nil
}

// spawner is the goroutine, locked to its thread for its whole life,
// that starts init and then every sandboxed process. Init's parent-death
// signal is tied to this thread, and the thread ends (the goroutine
// returns locked) only when the instance ends: so init, and with it the
// whole PID namespace, dies with the instance or the daemon.
func (s *Sandbox) spawner(inst *instance, ready chan<- error) {
	runtime.LockOSThread()
	fail := func(err error) {
		ready <- err
	}
	if err := s.cg.joinThread(); err != nil {
		fail(err)
		return
	}
	ispec := initSpec{Root: inst.dir, Workspace: s.cfg.Workspace, Hostname: s.cfg.Hostname,
		Loopback: s.cfg.ownNet(), TmpSize: tmpfsSize(s.cfg.Memory),
		Source: s.ws.resolved, Dev: s.ws.dev, Ino: s.ws.ino}
	if s.cfg.Nameserver.IsValid() {
		ispec.Nameserver = s.cfg.Nameserver.String()
	}
	if s.cfg.UID != 0 && !s.userns && s.cfg.System == nil {
		ispec.Account = &initAccount{Name: s.cfg.User, UID: s.uid, GID: s.gid, Home: s.cfg.Workspace}
	}
	spec, _ := json.Marshal(ispec)
	keepR, keepW, err := os.Pipe()
	if err != nil {
		fail(fmt.Errorf("sandbox: %w", err))
		return
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		keepR.Close()
		keepW.Close()
		fail(fmt.Errorf("sandbox: %w", err))
		return
	}
	flags := uintptr(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if s.cfg.ownNet() {
		flags |= unix.CLONE_NEWNET
	}
	cmd := &exec.Cmd{Path: Executable, Args: []string{"aiod-sandbox-init", InitArg, string(spec)},
		Env: initEnv, Dir: "/", Stdin: keepR, ExtraFiles: []*os.File{repW},
		// Setsid: init is no member of the daemon's session, so it has no
		// controlling terminal (the daemon's, when a user started it in a
		// terminal) that /dev/tty inside would open.
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL, Setsid: true}}
	var trees []*os.File // a whole machine's layers, closed once init has them
	defer func() {
		for _, f := range trees {
			f.Close()
		}
	}()
	if sys := s.cfg.System; sys != nil {
		// Init is root of a user namespace of its own, which owns the
		// other namespaces; the daemon makes the idmapped trees of the
		// layers and the workspace, which init attaches.
		// The namespace is made as the range's first id (ownedInit), so
		// that id owns it: the kernel counts the sandbox's per-user
		// budgets to it, and a process started as it, with no privilege
		// on the host, may join it (throughNsenter).
		idmap := []syscall.SysProcIDMap{{ContainerID: 0, HostID: sys.IDs, Size: SystemIDs}}
		a := cmd.SysProcAttr
		a.Cloneflags |= unix.CLONE_NEWUSER
		a.UidMappings, a.GidMappings, a.GidMappingsEnableSetgroups = idmap, idmap, true
		a.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
		isys, files, err := s.systemTrees()
		if err != nil {
			keepR.Close()
			keepW.Close()
			repR.Close()
			repW.Close()
			fail(err)
			return
		}
		trees = files
		isys.offset(3 + len(cmd.ExtraFiles))
		ispec.System = isys
		cmd.ExtraFiles = append(cmd.ExtraFiles, files...)
	} else if s.ws.userns != nil { // the idmapping's user namespace, after the other files
		ispec.UsernsFD = 3 + len(cmd.ExtraFiles)
		cmd.ExtraFiles = append(cmd.ExtraFiles, s.ws.userns)
	}
	// The compiled filter, for init (see encodeFilter). It fits a pipe's
	// buffer (16 KiB or more; a user past the kernel's pipe quota gets
	// 8 KiB, and the wait bounds that case), so it is written whole
	// before init starts; init compiles its own when it is not sent.
	var filterR *os.File
	if prog, err := filterProgram(); err == nil {
		r, w, err := os.Pipe()
		if err == nil {
			_ = w.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, err = w.Write(encodeFilter(prog))
			w.Close()
			if err == nil {
				ispec.FilterFD = 3 + len(cmd.ExtraFiles)
				cmd.ExtraFiles = append(cmd.ExtraFiles, r)
				filterR = r
			} else {
				r.Close()
			}
		}
	}
	if f, err := reaperFile(); err == nil && f != nil {
		ispec.ReaperFD = 3 + len(cmd.ExtraFiles)
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	spec, _ = json.Marshal(ispec)
	cmd.Args[len(cmd.Args)-1] = string(spec)
	// Registered as an exec.Cmd's child: a commands engine of another
	// daemon in this process (a pool runs many) never takes this init,
	// a direct child of the process in its own session, for an orphan to
	// signal or a zombie to reap.
	s.intoCgroup(cmd)
	if s.cfg.System != nil {
		err = ownedInit(cmd, s.cfg.System.IDs)
	} else {
		err = child.Start(cmd, cmd.Start)
	}
	keepR.Close()
	repW.Close()
	for _, f := range trees { // init has its own copies, or never will
		f.Close()
	}
	trees = nil
	if filterR != nil {
		filterR.Close()
	}
	if err != nil {
		repR.Close()
		keepW.Close()
		// The kernel refusing the namespaces themselves is the machine's
		// limit (a container without CAP_SYS_ADMIN, a seccomp profile).
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EUSERS) || errors.Is(err, unix.ENOSPC) {
			err = machineError{err}
		}
		fail(fmt.Errorf("sandbox: starting init: %w", err))
		return
	}
	inst.init, inst.keep = cmd, keepW
	if s.cg != nil {
		_ = s.cg.place(cmd.Process.Pid)
	}
	go waitExit(cmd, inst.done)
	// Init writes one line: empty when the view is built, else why not.
	raw, _ := bufio.NewReader(repR).ReadString('\n')
	repR.Close()
	if raw != "\n" {
		keepW.Close()
		<-inst.done
		line := strings.TrimSpace(raw)
		if line == "" {
			line = "sandbox: init exited before building the view"
		}
		fail(errors.New(line))
		return
	}
	// Init is alive and has reported: its PID is still its own.
	if err := openNS(inst, cmd.Process.Pid, s.cfg.ownNet(), s.cfg.System != nil); err != nil {
		keepW.Close()
		<-inst.done
		fail(err)
		return
	}
	// A whole machine's spawner stays in the host's mount namespace: the
	// first program of each new process (nsenter) is the host's, loaded
	// with the host's libraries, never the sandbox's (throughNsenter).
	if err := enter(inst, true, s.cfg.System != nil); err != nil {
		keepW.Close()
		<-inst.done
		closeNS(inst)
		fail(err)
		return
	}
	if s.cfg.Network == NetworkHost {
		if err := scopeAbstractSockets(); err != nil {
			s.scopeErr.Store(err.Error())
		}
	}
	if err := confineSpawner(s.cfg.System != nil); err != nil {
		keepW.Close()
		<-inst.done
		closeNS(inst)
		fail(err)
		return
	}
	ready <- nil
	for {
		select {
		case f := <-inst.spawn:
			f()
		case <-inst.done:
			s.cg.leaveThread()
			return // the thread ends with the goroutine (still locked)
		case <-inst.quit:
			s.cg.leaveThread()
			return
		}
	}
}

// nsNames are the namespaces of init the instance keeps open, in the
// order a spawning thread joins them (mount last: the others are opened
// through /proc, which the mount namespace changes).
var nsNames = []struct {
	name string
	flag int
}{{"ipc", unix.CLONE_NEWIPC}, {"uts", unix.CLONE_NEWUTS}, {"net", unix.CLONE_NEWNET}, {"pid", unix.CLONE_NEWPID}, {"mnt", unix.CLONE_NEWNS}}

// openNS opens init's namespaces and root; the caller has checked that
// init is alive and ready, so the PID is still init's.
func openNS(inst *instance, pid int, ownNet, user bool) error {
	inst.ns = map[string]int{}
	names := nsNames
	if user { // a whole machine's: its processes join it (throughNsenter)
		names = append(slices.Clone(nsNames), struct {
			name string
			flag int
		}{"user", unix.CLONE_NEWUSER})
	}
	for _, n := range names {
		if n.name == "net" && !ownNet {
			continue // the host's, which every thread already has
		}
		fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/"+n.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			closeNS(inst)
			return fmt.Errorf("sandbox: %s namespace: %w", n.name, err)
		}
		inst.ns[n.name] = fd
	}
	root, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		closeNS(inst)
		return fmt.Errorf("sandbox: root: %w", err)
	}
	inst.root = root
	return nil
}

func closeNS(inst *instance) {
	inst.nsMu.Lock()
	defer inst.nsMu.Unlock()
	for _, fd := range inst.ns {
		unix.Close(fd)
	}
	inst.ns = nil
	if inst.root != nil {
		inst.root.Close()
		inst.root = nil
	}
}

// enter joins the calling, locked thread to the instance's namespaces:
// with all, IPC, UTS, the network one (when the sandbox has its own)
// and PID (for the thread's future
// children); always the mount namespace, last, after unsharing the
// file-system attributes the Go runtime's threads share (setns to a
// mount namespace refuses a thread that shares them).
func enter(inst *instance, all, noMount bool) error {
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("sandbox: unshare: %w", err)
	}
	inst.nsMu.RLock()
	defer inst.nsMu.RUnlock()
	if inst.ns == nil {
		return errEnded // never a thread left on the host's view
	}
	for _, n := range nsNames {
		fd, ok := inst.ns[n.name]
		if !ok || !all && n.name != "mnt" && n.name != "net" || noMount && n.name == "mnt" {
			continue
		}
		if err := unix.Setns(fd, n.flag); err != nil {
			return fmt.Errorf("sandbox: entering the %s namespace: %w", n.name, err)
		}
	}
	return unix.Chdir("/")
}

// waitExit closes done once cmd's process (init) has exited and is
// reaped. cmd.Wait alone would block an OS thread in waitid for the
// instance's whole life (one more thread per idle sandbox); a pidfd in
// the runtime's poller costs none. Where the kernel has no pidfd (before
// 5.3, or 5.10 for PIDFD_NONBLOCK), Wait blocks as before.
func waitExit(cmd *exec.Cmd, done chan<- struct{}) {
	defer close(done)
	if fd, err := unix.PidfdOpen(cmd.Process.Pid, unix.PIDFD_NONBLOCK); err == nil {
		f := os.NewFile(uintptr(fd), "pidfd")
		if rc, err := f.SyscallConn(); err == nil {
			// A pidfd is readable once its process has exited. Read's
			// function reports done when waitid (WNOWAIT: the status is
			// left for Wait) finds it exited, or cannot tell; else the
			// goroutine parks in the poller.
			_ = rc.Read(func(fd uintptr) bool {
				var info unix.Siginfo
				err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
				return err != nil || info.Signo != 0
			})
		}
		f.Close()
	}
	_ = cmd.Wait()
	child.Forget(cmd.Process.Pid)
}

// doThread serves Do on a thread of the sandbox's view (see joinView):
// first runs first, then the pool's calls until the instance ends.
func (s *Sandbox) doThread(inst *instance, first func(), ready chan<- error) {
	runtime.LockOSThread()
	if err := s.joinView(inst); err != nil {
		ready <- err
		return
	}
	ready <- nil
	first()
	for {
		select {
		case f := <-inst.do:
			f()
		case <-inst.done:
			return
		case <-inst.quit:
			return
		}
	}
}

// oneShot serves one Do call on a thread of its own, for when every
// pool thread is busy; the thread ends with it.
func (s *Sandbox) oneShot(inst *instance, f func(), ready chan<- error) {
	runtime.LockOSThread()
	if err := s.joinView(inst); err != nil {
		ready <- err
		return
	}
	ready <- nil
	f()
}

// joinView gives the calling, locked thread the sandbox's mount and
// network namespaces and makes it the sandbox account entirely: no
// supplementary groups, and real, effective and saved ids (hence the
// file-system ids) of the account, which drops every capability. A file
// operation is then checked as a sandbox process's would be, including
// the checks that look at the effective id rather than the file-system
// one (/proc/sys). Ids and groups are per-thread in Linux (the raw
// system calls, not Go's all-threads wrappers). The thread must never be
// unlocked: its goroutine ends locked, which ends the thread.
func (s *Sandbox) joinView(inst *instance) error {
	if err := enter(inst, false, false); err != nil {
		return err
	}
	// In an unprivileged daemon's user namespace the groups cannot be
	// changed (the kernel denies setgroups there) and are the caller's.
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 && !s.userns {
		return fmt.Errorf("sandbox: setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(s.gid), uintptr(s.gid), uintptr(s.gid)); e != 0 {
		return fmt.Errorf("sandbox: setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(s.uid), uintptr(s.uid), uintptr(s.uid)); e != 0 {
		return fmt.Errorf("sandbox: setresuid: %w", e)
	}
	if unix.Geteuid() != s.uid {
		return errors.New("sandbox: could not become the sandbox account")
	}
	return nil
}

// instance returns the live instance, starting a new one if init died.
func (s *Sandbox) instance() (*instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("sandbox: closed")
	}
	select {
	case <-s.cur.done:
		if s.paused.Load() {
			// A new init would be born in the frozen group (v2: a
			// frozen init can be killed) and never report: its start
			// waits for Resume.
			return nil, errors.New("sandbox: the sandbox ended while paused; resume it to start it again")
		}
		s.log.Warn("sandbox: init exited; starting the sandbox again (its processes are gone)")
		s.end(s.cur)
		inst, err := s.start()
		if err != nil {
			return nil, err
		}
		s.cur = inst
	default:
	}
	return s.cur, nil
}

// intoCgroup asks, on cgroup v2, for cmd to be born in the sandbox's
// group.
func (s *Sandbox) intoCgroup(cmd *exec.Cmd) {
	if s.cg != nil && s.cg.v2fd >= 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, s.cg.v2fd
	}
}

// Wrap returns a start function that runs start (cmd.Start or a wrapper
// around it) inside the sandbox: from the spawner thread, as the sandbox
// account, in the sandbox's cgroup. Whatever identity the plane asked
// for, a sandboxed process is never root.
func (s *Sandbox) Wrap(cmd *exec.Cmd, start func() error) func() error {
	if s == nil {
		return start
	}
	return func() error {
		// Held until the process is in every group: see Sandbox.gate.
		s.gate.RLock()
		defer s.gate.RUnlock()
		if s.paused.Load() {
			return ErrPaused
		}
		inst, err := s.instance()
		if err != nil {
			return err
		}
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.gid), Groups: []uint32{}, NoSetGroups: s.userns}
		// "/proc/self/exe" is this binary in a fork of the daemon, but
		// the program a process starts as may be another (setid,
		// nsenter, the stage): it is given by a descriptor instead.
		if cmd.Path == "/proc/self/exe" {
			exe, err := binaryStage()
			if err != nil {
				return err
			}
			cmd.Path = "/proc/self/fd/" + strconv.Itoa(3+len(cmd.ExtraFiles))
			cmd.ExtraFiles = append(cmd.ExtraFiles, exe)
		}
		var nsFiles []*os.File // the machine's namespaces, for nsenter; closed once started
		if s.cfg.System != nil {
			if nsFiles, err = s.throughNsenter(cmd, inst); err != nil {
				return err
			}
			defer func() {
				for _, f := range nsFiles {
					f.Close()
				}
			}()
		}
		// The identity is taken in setid, not in the daemon's fork
		// (spawn_linux.go).
		setidFiles, err := throughSetid(cmd)
		if err != nil {
			return err
		}
		defer func() {
			for _, f := range setidFiles {
				f.Close()
			}
		}()
		detachTerminal(cmd.SysProcAttr)
		held := s.holdAtExec(cmd)
		done := make(chan struct{})
		f := func() {
			err = start()
			if held && cmd.Process != nil { // started, held at its exec (even if start then failed)
				if rerr := s.releaseHeld(cmd.Process.Pid); err == nil {
					err = rerr
				}
			}
			// A terminal's other end (the child's standard input, from the
			// sandbox's own devpts) belongs to the account, so a program
			// that reopens its terminal by name may.
			// (A whole machine's terminals are opened inside, its root's
			// already: OpenPTY.)
			if in, ok := cmd.Stdin.(*os.File); ok && err == nil && s.cfg.System == nil && strings.HasPrefix(in.Name(), "/dev/pts/") {
				_ = os.Chown(in.Name(), s.uid, s.gid)
			}
			close(done)
		}
		select {
		case inst.spawn <- f:
		case <-inst.done:
			return errors.New("sandbox: the sandbox ended while starting a process")
		case <-inst.quit:
			return errors.New("sandbox: closed")
		}
		<-done
		if err != nil {
			return err
		}
		unprotect(cmd.Process.Pid)
		if s.cg != nil {
			_ = s.cg.place(cmd.Process.Pid)
			select { // after the placement: see monitor
			case s.started <- struct{}{}:
			default: // a sweep is due already
			}
		} else {
			s.rlimit(cmd.Process.Pid)
		}
		return nil
	}
}

// detachTerminal starts a sandboxed process in a session of its own
// unless the caller gave it one (a terminal's Setsid and Setctty). The
// spawner is a thread of the daemon, whose session may hold the terminal
// the user started it in: a child left in that session has it as its
// controlling terminal, and /dev/tty inside the sandbox opens it, so a
// command could read the user's keystrokes, write to the screen, or push
// input into the user's shell with TIOCSTI (a red-team pass ran a
// command as root on the host that way). A process asked to lead a new
// process group (Setpgid, Pgid 0) leads a new session instead, which
// makes it the leader of a new group as well (setpgid would fail on a
// session leader). Only a process joining an existing group (Pgid set)
// stays in its session: that group's leader is detached already.
func detachTerminal(a *syscall.SysProcAttr) {
	if a.Setsid || a.Setctty || a.Foreground {
		a.Setsid = true
		return
	}
	if a.Setpgid && a.Pgid != 0 {
		return
	}
	a.Setpgid, a.Setsid = false, true
}

// rlimit is the fallback without cgroups: the address space and the
// account's process count, per process.
func (s *Sandbox) rlimit(pid int) {
	if s.cfg.Memory > 0 {
		l := unix.Rlimit{Cur: uint64(s.cfg.Memory), Max: uint64(s.cfg.Memory)}
		_ = unix.Prlimit(pid, unix.RLIMIT_AS, &l, nil)
	}
	if s.cfg.Pids > 0 {
		l := unix.Rlimit{Cur: uint64(s.cfg.Pids), Max: uint64(s.cfg.Pids)}
		_ = unix.Prlimit(pid, unix.RLIMIT_NPROC, &l, nil)
	}
}

// Do runs f on a thread that sees the sandbox's filesystem (and network,
// under --network none) as the sandbox account: absolute paths and
// symbolic links resolve against the sandbox's root (the kernel's own
// confinement, as openat2's RESOLVE_IN_ROOT would give), and permissions
// are the account's. f must do its path work itself: goroutines it
// starts run outside the sandbox. A descriptor f opens works anywhere,
// so streaming its content belongs outside f. A panic in f is raised
// again in the caller. When every thread Do may use is busy, the call
// waits up to 10 s for one and then fails with [ErrBusy]
// (dobound_linux.go; [Sandbox.DoContext] bounds the wait by a context).
func (s *Sandbox) Do(f func() error) error {
	return s.DoContext(context.Background(), f)
}

// do runs f as Do says, holding one of Do's slots.
func (s *Sandbox) do(f func() error) error {
	inst, err := s.instance()
	if err != nil {
		return err
	}
	done := make(chan struct{})
	var ferr error
	var panicked any
	g := func() {
		defer func() {
			panicked = recover()
			close(done)
		}()
		ferr = f()
	}
	select {
	case inst.do <- g: // an idle pool thread took it
	case <-inst.done:
		return errors.New("sandbox: the sandbox ended")
	case <-inst.quit:
		return errors.New("sandbox: closed")
	default:
		// No pool thread is idle: a new one while the pool has fewer
		// than doThreads, else (a slow disk, a long walk keeps them
		// busy) a thread of its own rather than a queue behind them.
		inst.doMu.Lock()
		grow := inst.doN < doThreads
		if grow {
			inst.doN++
		}
		inst.doMu.Unlock()
		r := make(chan error, 1)
		if grow {
			go s.doThread(inst, g, r)
		} else {
			go s.oneShot(inst, g, r)
		}
		if err := <-r; err != nil {
			if grow {
				inst.doMu.Lock()
				inst.doN--
				inst.doMu.Unlock()
			}
			return err
		}
	}
	<-done
	if panicked != nil {
		panic(panicked)
	}
	return ferr
}

// monitor, until Close, moves stray processes into the v1 memory and
// freezer groups and logs each kill for the memory limit, which the
// planes only see as a process ending by SIGKILL.
//
// A stray is a process forked by a new one before Wrap placed it: a
// child of a placed process is born in its groups. So strays appear
// only after a start, and a sweep that moves none leaves none behind
// until the next start. The monitor sweeps every sweepEvery after a
// start (Wrap signals s.started) until a sweep moves none (the moved
// ones' own children may be strays), and otherwise only reads the kill
// count every idleEvery. A pool's idle sandboxes each cost four reads
// of four files a second before: twenty took 4.8% of a core, and now
// (with this slower tick) 0.6%.
func (s *Sandbox) monitor() {
	const sweepEvery, idleEvery = 250 * time.Millisecond, 2 * time.Second
	t := time.NewTimer(idleEvery)
	defer t.Stop()
	seen := s.cg.oomKills()
	pending := false // a start since the last sweep that moved none
	for {
		select {
		case <-s.stop:
			return
		case <-s.started:
			if !pending {
				pending = true
				t.Reset(sweepEvery)
			}
		case <-t.C:
			if pending {
				pending = s.cg.sweep() > 0
			}
			if pending {
				t.Reset(sweepEvery)
			} else {
				t.Reset(idleEvery)
			}
			if n := s.cg.oomKills(); n != seen {
				s.log.Warn("sandbox: the memory limit was reached; the kernel killed the largest process in the sandbox",
					"limit", FormatSize(s.cfg.Memory), "kills", n)
				seen = n
			}
		}
	}
}

// OOMKills is how many processes the kernel has killed for reaching the
// sandbox's memory limit (0 without cgroups).
func (s *Sandbox) OOMKills() uint64 {
	if s == nil {
		return 0
	}
	return s.cg.oomKills()
}

// OOMNote explains the end of a process that died by SIGKILL: when the
// kernel has killed a process for the memory limit since mark (an
// OOMKills reading taken when the run began), it says so, for the plane
// to put in the run's result; otherwise "". A plane calls it only for a
// SIGKILL it did not send itself.
func (s *Sandbox) OOMNote(mark uint64) string {
	if s == nil || s.OOMKills() <= mark {
		return ""
	}
	return "the sandbox reached its memory limit (" + FormatSize(s.cfg.Memory) + ")"
}

// end stops an instance: init's standard input closes, init exits, and
// the kernel kills every process left in its PID namespace.
//
// Init's exit completes only once every process of its namespace is
// reaped, and a process the daemon started is reaped by its plane's
// Wait, not by init: so end waits a bounded time and never for the
// planes (they reap what the kernel killed, and init then goes).
func (s *Sandbox) end(inst *instance) {
	// Once: an instance whose successor failed to start stays current,
	// and the next use or Close ends it again.
	if inst.ended {
		return
	}
	inst.ended = true
	close(inst.quit)
	inst.keep.Close()
	select {
	case <-inst.done:
	case <-time.After(2 * time.Second):
		_ = inst.init.Process.Kill()
		select {
		case <-inst.done:
		case <-time.After(2 * time.Second):
			s.log.Warn("sandbox: init is still waiting for processes of the sandbox to be reaped")
		}
	}
	closeNS(inst)
	os.Remove(inst.dir)
}

// Close ends the sandbox and every process in it, paused or not, and
// removes its cgroups.
func (s *Sandbox) Close() error {
	if s == nil {
		return nil
	}
	s.gate.Lock() // no start in flight, no pause or resume under way
	defer s.gate.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.stop)
	if s.paused.Load() {
		// Frozen processes cannot die (v1) nor read init's pipe: each
		// is killed while frozen, then thawed into its death.
		s.cg.killFrozen()
		_ = s.cg.thaw()
		s.paused.Store(false)
	}
	s.end(s.cur)
	s.spawners.Wait() // their leaveThread writes through the files remove closes
	s.cg.remove()
	s.ws.close()
	s.closeNsenter()
	return nil
}

// Account is the account sandbox processes run as: the host account
// Config.User names, or, with Config.UID, the ids given and the name the
// view's /etc/passwd gives them (Config.UserName).
func (s *Sandbox) Account() (name string, uid, gid int) {
	return s.cfg.User, s.uid, s.gid
}

// Report is what the sandbox enforces, for /v1/capabilities and doctor.
func (s *Sandbox) Report() Report {
	if s == nil {
		return Report{Isolation: None}
	}
	r := Report{Isolation: Namespaces, Network: s.cfg.Network, User: s.cfg.User, UID: s.hostUID,
		Namespaces: []string{"mount", "pid", "ipc", "uts"}, Limits: "rlimit", Warnings: s.warnings}
	if s.cfg.ownNet() {
		r.Namespaces = append(r.Namespaces, "net")
	}
	if s.userns {
		r.Namespaces = append(r.Namespaces, "user")
	}
	r.Workspace = s.ws.idmap
	if why, _ := s.scopeErr.Load().(string); why != "" {
		r.Warnings = append(append([]string{}, r.Warnings...), "the host's abstract Unix sockets are reachable under --network host: "+why)
	}
	if s.cg != nil {
		r.Limits = "cgroup v1"
		if s.cg.v2 != "" {
			r.Limits = "cgroup v2"
		}
	}
	if s.cfg.Memory > 0 {
		r.Memory = FormatSize(s.cfg.Memory)
	}
	if s.cfg.Pids > 0 {
		r.Pids = s.cfg.Pids
	}
	if s.cfg.CPUs > 0 {
		r.CPUs = s.cfg.CPUs
	}
	return r
}

// OpenInView opens path of the sandbox's view without following any
// symbolic link or leaving the view (openat2 with RESOLVE_IN_ROOT and
// RESOLVE_NO_SYMLINKS from the instance's root), as an O_PATH
// descriptor: enough to connect to a socket the sandbox made, through
// /proc/self/fd/N, with no way for the sandbox to redirect the daemon
// to one of the host's.
func (s *Sandbox) OpenInView(path string) (*os.File, error) {
	inst, err := s.instance()
	if err != nil {
		return nil, err
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	inst.nsMu.RLock()
	defer inst.nsMu.RUnlock()
	if inst.root == nil {
		return nil, errEnded
	}
	fd, err := unix.Openat2(int(inst.root.Fd()), strings.TrimPrefix(filepath.Clean("/"+path), "/"), &how)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
