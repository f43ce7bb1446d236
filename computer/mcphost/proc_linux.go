package mcphost

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// lifelineFD is the supervisor's file descriptor for the lifeline's read
// end (the first of exec.Cmd.ExtraFiles).
const lifelineFD = 3

var (
	lifelineOnce sync.Once
	lifelineR    *os.File
	lifelineErr  error
)

// lifeline returns the read end of this process's lifeline pipe. Both ends
// are close-on-exec: only the supervisors get the read end (through
// ExtraFiles), and no child ever gets the write end. The write end is a
// bare descriptor (no *os.File, whose finalizer could close it) that is
// never closed, so it closes exactly when this process ends.
func lifeline() (*os.File, error) {
	lifelineOnce.Do(func() {
		var p [2]int
		if lifelineErr = syscall.Pipe2(p[:], syscall.O_CLOEXEC); lifelineErr == nil {
			lifelineR = os.NewFile(uintptr(p[0]), "a2c-lifeline")
		}
	})
	return lifelineR, lifelineErr
}

// platformCommand wraps server in its supervisor when one is named, or
// gives it its own process group (and the parent-death signal) otherwise.
func platformCommand(server *exec.Cmd, supervisor string) (*exec.Cmd, func()) {
	if supervisor != "" {
		// A supervisor binary that is gone (deleted by an upgrade, say)
		// falls back to the unsupervised group rather than to no server.
		_, serr := os.Stat(supervisor)
		if r, err := lifeline(); err == nil && serr == nil {
			args := append([]string{SupervisorArg, "--grace", groupGrace.String(), "--", server.Path}, server.Args[1:]...)
			cmd := exec.Command(supervisor, args...)
			cmd.ExtraFiles = []*os.File{r}
			// The supervisor ends the group itself, whichever way it stops.
			return cmd, func() {}
		}
	}
	server.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return server, func() {
		if server.Process != nil {
			endGroup(server.Process.Pid, groupGrace)
		}
	}
}

// Supervise runs a stdio server under supervision and returns the exit
// code for the process; args are what follows [SupervisorArg]:
// [--grace D] -- COMMAND [ARG...]. It is the whole program of a
// supervisor process (see the package's process-tree notes in proc.go).
//
// The server inherits stdin, stdout and stderr (nothing is copied), runs
// as the leader of a new process group with the parent-death signal
// SIGKILL, and the supervisor ends its whole tree (the group, then any
// descendant that left it; see endTree) when:
//   - the server exits (leftover descendants would otherwise linger);
//   - the supervisor gets SIGTERM (a normal shutdown by the Computer);
//   - the lifeline on fd 3 reads EOF (the Computer is gone).
//
// SIGINT and SIGHUP are ignored: a terminal's Ctrl-C or hangup reaches the
// Computer, which decides when its servers stop.
func Supervise(args []string) int {
	fs := flag.NewFlagSet(SupervisorArg, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	grace := fs.Duration("grace", groupGrace, "time between SIGTERM and SIGKILL for the server's group")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "a2c "+SupervisorArg+": usage: [--grace D] -- COMMAND [ARG...]")
		return 2
	}
	argv := fs.Args()
	// The parent-death signal of the server follows the OS thread that
	// forks it; this goroutine keeps that thread until the process exits.
	runtime.LockOSThread()
	// Orphaned descendants are re-parented here, so they are reaped here
	// instead of lingering as zombies of an init that may not reap.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

	lost := make(chan struct{})
	var st syscall.Stat_t
	if syscall.Fstat(lifelineFD, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO {
		syscall.CloseOnExec(lifelineFD) // the server must not hold the lifeline
		go func() {
			buf := make([]byte, 1)
			for {
				n, err := syscall.Read(lifelineFD, buf)
				if n == 0 || (err != nil && !errors.Is(err, syscall.EINTR)) {
					close(lost)
					return
				}
			}
		}()
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "a2c %s: %v\n", SupervisorArg, err)
		return 127
	}
	// Caught signals are reset to their defaults across exec, so the
	// server sees SIGTERM, SIGINT and SIGHUP normally.
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "a2c %s: %v\n", SupervisorArg, err)
		return 127
	}
	leader := make(chan syscall.WaitStatus, 1)
	go reapAll(pid, leader)
	for {
		select {
		case ws := <-leader:
			endTree(pid, *grace)
			return exitCode(ws)
		case <-lost:
			endTree(pid, *grace)
			return 1
		case s := <-sigs:
			if s == syscall.SIGTERM {
				endTree(pid, *grace)
				return 128 + int(syscall.SIGTERM)
			}
		}
	}
}

// endTree ends the server's process group, then whatever of its tree
// left the group (a daemon that called setsid, say). As a child subreaper
// the supervisor inherits every orphan of the tree, so once the group is
// gone its remaining children are exactly the tree's remainder; killing
// one may orphan more to it, hence the loop (bounded by 2 s).
func endTree(pgid int, grace time.Duration) {
	endGroup(pgid, grace)
	self := os.Getpid()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		kids := liveChildren(self)
		if len(kids) == 0 {
			return
		}
		for _, k := range kids {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
	}
}

// liveChildren lists the processes whose parent is ppid and that have not
// yet ended (zombies are left to reapAll), from /proc.
func liveChildren(ppid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces and ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if p, err := strconv.Atoi(f[1]); err == nil && p == ppid {
			out = append(out, pid)
		}
	}
	return out
}

// reapAll reaps every child of the supervisor (the server and any
// orphaned descendant) until none is left, and reports the server's own
// status on leader.
func reapAll(leaderPID int, leader chan<- syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return // ECHILD: no child left, so no descendant can orphan to us
		}
		if pid == leaderPID {
			leader <- ws
		}
	}
}

func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
