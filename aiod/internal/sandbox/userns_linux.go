package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// envUserNS marks a process that ReexecUnprivileged started inside a
// user namespace of its own; its value is the caller's uid on the host.
const envUserNS = "AIOD_USERNS_HOST_UID"

// ReexecUnprivileged is how an unprivileged daemon gets a sandbox. Joining
// the sandbox's namespaces (setns) needs capabilities, and a Go process
// cannot enter a user namespace once it runs threads, so the daemon runs
// itself again (argv, environment, standard streams unchanged) inside a
// new user namespace where its uid and gid are root, with every
// capability there and none on the host; that copy creates and enters
// the sandbox as a root daemon would. This process only forwards
// signals and returns the copy's exit status (ok true). ok is false, and
// nothing is done, for root, inside such a copy already, or where the
// machine refuses unprivileged user namespaces (the caller then runs
// without isolation or fails, as it would have).
func ReexecUnprivileged(argv []string) (code int, ok bool) {
	if os.Geteuid() == 0 || os.Getenv(envUserNS) != "" {
		return 0, false
	}
	uid, gid := os.Geteuid(), os.Getegid()
	cmd := exec.Command("/proc/self/exe", argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = append(os.Environ(), envUserNS+"="+strconv.Itoa(uid))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
		// Its own process group: a terminal's Ctrl-C reaches this
		// process, which passes it on once (the copy shuts down on the
		// first and may stop at once on a second).
		Setpgid:   true,
		Pdeathsig: syscall.SIGTERM,
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, false // no user namespaces here
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), true
		}
		return ee.ExitCode(), true
	}
	return 1, true
}

// userNSHost reports the caller's host uid when this process runs in
// the user namespace ReexecUnprivileged made.
func userNSHost() (uid int, ok bool) {
	v := os.Getenv(envUserNS)
	if v == "" || os.Geteuid() != 0 {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}
