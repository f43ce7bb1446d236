package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// What every process of the sandbox is born with, as container runtimes
// give it: no_new_privs (no set-user-id bit or file capability ever
// raises a privilege, so an exec cannot undo what follows), an empty
// capability bounding set, no inheritable or ambient capability, and
// the system-call filter (seccomp_linux.go). All four are attributes of
// a thread that a child inherits and exec keeps.

// dropBounding empties the calling thread's capability bounding set and
// its ambient set. It needs CAP_SETPCAP, which the thread still has: its
// own effective and permitted sets are untouched (a thread of the daemon
// still switches a child's identity and places it in a cgroup).
func dropBounding() error { return keepBounding(nil) }

// keepBounding drops every capability but keep from the calling
// thread's bounding set, and clears its ambient set (see dropBounding).
func keepBounding(keep []uintptr) error {
	for c := 0; c <= 63; c++ {
		if slices.Contains(keep, uintptr(c)) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fmt.Errorf("sandbox: dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("sandbox: clearing ambient capabilities: %w", err)
	}
	return nil
}

// setCaps sets the calling thread's effective and permitted sets to
// keep (both 64-bit halves) and its inheritable set to nothing.
func setCaps(keep bool) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if keep {
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			return fmt.Errorf("sandbox: reading capabilities: %w", err)
		}
	}
	for i := range data {
		data[i].Inheritable = 0
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: setting capabilities: %w", err)
	}
	return nil
}

// confineSpawner gives the calling, locked thread (the spawner, inside
// the sandbox's namespaces) what every sandboxed process must inherit:
// no_new_privs, a bounding set emptied but for what setid needs (which
// setid empties), no inheritable or ambient capability, and the filter. The thread keeps its own effective
// capabilities, so it can still start processes as the account; a
// child's identity switch to that account then clears the rest.
//
// For a whole machine (system) the bounding set keeps containerCaps,
// root's capabilities inside, and the filter is the machine's: what
// every process of it inherits (system_linux.go). Otherwise it keeps
// setidCaps: a process takes its identity in setid, after its exec
// (spawn_linux.go), which needs them and drops them before anything of
// the sandbox's runs.
func confineSpawner(system bool) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	keep, compile := setidCaps, filterProgram
	if system {
		keep, compile = containerCaps, systemFilterProgram
	}
	if err := keepBounding(keep); err != nil {
		return err
	}
	if err := setCaps(true); err != nil {
		return err
	}
	return installFilterOf(compile, false)
}

// confineInit is the sandbox's init giving up everything once its view
// is built, on the calling thread, before it executes itself again
// (see [Init]): exec keeps the thread's no_new_privs, filter and empty
// sets and drops the Go runtime's other threads, which still hold the
// capabilities the build needed. With an empty bounding set, root's exec
// gains no capability back. The filter is the one the daemon sent on
// filterFD (see encodeFilter), or, when it sent none, compiled here.
func confineInit(filterFD int) error {
	var prog []unix.SockFilter
	if filterFD > 2 {
		var err error
		if prog, err = readFilter(filterFD); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	if err := dropBounding(); err != nil {
		return err
	}
	if err := setCaps(false); err != nil {
		return err
	}
	if prog != nil {
		return installProgram(prog, false)
	}
	return installFilter(false)
}

// confinedArg is init's argument for its second stage.
const confinedArg = "confined"

// reexecConfined confines init (confineInit) and executes its second
// stage, which reports success and reaps: the static reaper the daemon
// passed on reaperFD (stage/reaper_amd64.S, where it exists), else this
// binary again. It returns only on failure. The standard input (the
// daemon's keep-alive pipe) and the report descriptor 3 pass through the
// exec. The arguments are the same for both forms (the daemon's tests
// find a sandbox's init by them).
func reexecConfined(filterFD, reaperFD int) error {
	if err := confineInit(filterFD); err != nil {
		return err
	}
	path := "/proc/self/exe"
	if reaperFD > 2 {
		// Through the view's /proc (mounted noexec, which does not
		// apply: the link leads to the memory file, on a mount of its
		// own).
		path = "/proc/self/fd/" + strconv.Itoa(reaperFD)
	}
	err := unix.Exec(path, []string{"aiod-sandbox-init", InitArg, confinedArg}, initEnv)
	return fmt.Errorf("sandbox: init executing itself confined: %w", err)
}
