package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The stage: how a whole machine's process becomes root inside with no
// more than a container's capabilities.
//
// Joining a user namespace grants every capability in it and resets the
// bounding set to the full one, whatever the joining process had, so
// root inside must drop them itself, after the join and before the
// command. The code that does it must be the daemon's: anything loaded
// from the machine's view (its /usr, its ld.so, its libraries, all
// writable by its root) could skip the drop and hand the next process
// every capability. So the join is split in two programs, both loaded
// while the process is still in the host's mount namespace:
//
//  1. the host's nsenter (throughNsenter; a C program, single-threaded,
//     which a user namespace's join requires) joins the machine's user
//     namespace only and becomes root there;
//  2. it executes the stage (stageFile, by its /proc/self/fd path),
//     which joins the machine's mount namespace, closes the descriptors
//     it was given, changes to the command's directory, empties the
//     bounding set but containerCaps, and executes the command. Root's
//     exec computes its capabilities from the bounding set, so the
//     command, and everything it starts, has at most containerCaps;
//     no_new_privs (inherited from the spawner) keeps a set-id program
//     or a file capability from raising them.
//
// The stage has two forms with one argument format (stageArgs). Where
// stageCode exists (x86-64), it is a static program of a few hundred
// bytes, assembled from stage/stage_amd64.S, put in a sealed memory file of
// mode 0711 (stageELF): it loads nothing, and a start costs what an
// exec costs. Elsewhere it is this binary, started with InitArg and
// stageArg (stage below): the same steps in Go, on one locked thread
// that unshares its file-system attributes first (setns refuses a mount
// namespace to a thread sharing them), at the price of the Go runtime's
// and the packages' start, some milliseconds a process.
//
// While it runs, the stage holds every capability of the namespace: a
// process of the machine, with fewer, cannot ptrace it or read its
// memory (the kernel refuses a tracer whose capabilities are not a
// superset of the tracee's, in the same namespace, without
// CAP_SYS_PTRACE, which containerCaps lacks). Its environment is empty
// (the Go runtime reads GODEBUG and the like from it); the command's
// comes in its arguments.

// stageArg, as the argument of InitArg, makes this binary a whole
// machine's stage (its Go form); the stage's arguments (stageArgs)
// follow it.
const stageArg = "stage"

// stageFile is the stage, open for nsenter to execute by its
// /proc/self/fd path from the host's mount namespace: a sealed memory
// file holding stageELF where stageCode exists (staticStage), else this
// binary (binaryStage). Each is made once a process and never closed;
// ExtraFiles duplicates it into each child. goStage reports which.
func stageFile() (*os.File, error) {
	if goStage() {
		return binaryStage()
	}
	return staticStage()
}

// staticStage is the stage's static form in a sealed memory file.
var staticStage = sync.OnceValues(func() (*os.File, error) {
	return sealedFile("aiod-stage", stageELF(stageCode))
})

// binaryStage is this binary, open, for the stage's Go form.
var binaryStage = sync.OnceValues(func() (*os.File, error) {
	f, err := os.Open(Executable)
	if err != nil {
		return nil, fmt.Errorf("sandbox: the stage: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: the stage: %w", err)
	}
	// The stage runs as the range's id, not the binary's owner.
	if fi.Mode().Perm()&0o001 == 0 {
		f.Close()
		return nil, fmt.Errorf("sandbox: a whole machine needs this binary executable by other accounts (mode %v)", fi.Mode().Perm())
	}
	return f, nil
})

// reaperFile is reaperCode in a sealed memory file (sealedFile), made
// once a process; nil where there is no static reaper.
var reaperFile = sync.OnceValues(func() (*os.File, error) {
	if reaperCode == nil {
		return nil, nil
	}
	return sealedFile("sandbox-init", stageELF(reaperCode))
})

// forceGoStage makes the stage the Go form even where stageCode exists
// (tests of the Go form set it while no process is starting).
var forceGoStage bool

// goStage reports whether the stage is this binary (its Go form).
func goStage() bool { return stageCode == nil || forceGoStage }

// sealedFile is a memory file holding b, mode 0711 (executable by every
// account, readable by none but through this descriptor, so the kernel
// marks a process that executes it not dumpable), sealed against any
// change.
func sealedFile(name string, b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: %s: %w", name, err)
	}
	if err := unix.Fchmod(fd, 0o711); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: %s: %w", name, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: %s: %w", name, err)
	}
	return f, nil
}

// stageELF wraps code (position-independent, entered at its first byte)
// in a static ELF executable for stageMachine: one read-and-execute
// segment holding the headers and the code, and a stack that is not
// executable.
func stageELF(code []byte) []byte {
	const base, ehsize, phsize = 0x400000, 64, 56
	off := uint64(ehsize + 2*phsize)
	total := off + uint64(len(code))
	le := binary.LittleEndian
	b := make([]byte, 0, total)
	b = append(b, 0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little-endian */, 1 /* version */, 0 /* System V */)
	b = append(b, make([]byte, 8)...)
	b = le.AppendUint16(b, 2) // ET_EXEC
	b = le.AppendUint16(b, stageMachine)
	b = le.AppendUint32(b, 1)
	b = le.AppendUint64(b, base+off) // entry
	b = le.AppendUint64(b, ehsize)   // program headers
	b = le.AppendUint64(b, 0)        // no section headers
	b = le.AppendUint32(b, 0)
	b = le.AppendUint16(b, ehsize)
	b = le.AppendUint16(b, phsize)
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(b, 64)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	// PT_LOAD, read and execute, the whole file at base.
	b = le.AppendUint32(b, 1)
	b = le.AppendUint32(b, 5)
	b = le.AppendUint64(b, 0)
	b = le.AppendUint64(b, base)
	b = le.AppendUint64(b, base)
	b = le.AppendUint64(b, total)
	b = le.AppendUint64(b, total)
	b = le.AppendUint64(b, 0x1000)
	// PT_GNU_STACK, read and write.
	b = le.AppendUint32(b, 0x6474e551)
	b = le.AppendUint32(b, 6)
	b = append(b, make([]byte, 5*8)...)
	b = le.AppendUint64(b, 16)
	return append(b, code...)
}

// stageArgs are the stage's arguments (after its argv[0]) for the
// command path with argv and env in directory dir, given the numbers
// the three descriptors (the user namespace, the mount namespace, the
// stage) get in the child:
//
//	CONTROL DIR PATH ARGV... - ENV...
//
// CONTROL is six bytes, each 0x80|v (a NUL cannot be an argument): the
// three descriptors, then len(argv) in three 7-bit groups, lowest
// first. The "-" is a placeholder the stage overwrites with the end of
// the command's arguments. Descriptors must be below 128 and argv
// shorter than 1<<21 (the kernel's argument space ends far sooner).
func stageArgs(fds [3]int, dir, path string, argv, env []string) ([]string, error) {
	ctl := make([]byte, 0, 6)
	for _, fd := range fds {
		if fd < 3 || fd > 0x7f {
			return nil, fmt.Errorf("sandbox: the stage's descriptor %d is out of range", fd)
		}
		ctl = append(ctl, 0x80|byte(fd))
	}
	k := len(argv)
	if k == 0 || k >= 1<<21 {
		return nil, fmt.Errorf("sandbox: %d arguments", k)
	}
	ctl = append(ctl, 0x80|byte(k&0x7f), 0x80|byte(k>>7&0x7f), 0x80|byte(k>>14&0x7f))
	args := make([]string, 0, 4+len(argv)+len(env))
	args = append(args, string(ctl), dir, path)
	args = append(args, argv...)
	args = append(args, "-")
	return append(args, env...), nil
}

// stageSpec is the stage's arguments, parsed.
type stageSpec struct {
	fds       [3]int // the user namespace, the mount namespace, the stage
	dir, path string
	env, argv []string
}

// parseStage parses the stage's arguments (stageArgs). They come from
// the daemon, never from the sandbox, but a mistake must still end in a
// message, not a panic.
func parseStage(args []string) (stageSpec, error) {
	var sp stageSpec
	if len(args) < 4 || len(args[0]) != 6 {
		return sp, errors.New("bad arguments")
	}
	ctl := args[0]
	for i := range 6 {
		if ctl[i]&0x80 == 0 {
			return sp, errors.New("bad control bytes")
		}
	}
	for i := range 3 {
		sp.fds[i] = int(ctl[i] & 0x7f)
	}
	k := int(ctl[3]&0x7f) | int(ctl[4]&0x7f)<<7 | int(ctl[5]&0x7f)<<14
	if k == 0 || 3+k >= len(args) {
		return sp, errors.New("bad argument count")
	}
	sp.dir, sp.path = args[1], args[2]
	sp.argv = args[3 : 3+k]
	sp.env = args[4+k:] // past the placeholder
	return sp, nil
}

// stage is the stage's Go form (see the comment at the top of this
// file). It returns only on failure, with the exit status, after a line
// on the standard error (the command's), as the static form writes it.
func stage(args []string) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "sandbox: "+format+"\n", a...)
		return code
	}
	sp, err := parseStage(args)
	if err != nil {
		return fail(1, "cannot enter the machine: %v", err)
	}
	// Everything below acts on this thread, which then executes the
	// command: the exec takes the thread's namespaces and credentials.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fail(1, "cannot enter the machine: %s", errnoText(err))
	}
	if err := unix.Setns(sp.fds[1], unix.CLONE_NEWNS); err != nil {
		return fail(1, "cannot enter the machine: %s", errnoText(err))
	}
	for _, fd := range sp.fds {
		unix.Close(fd)
	}
	if err := unix.Chdir(sp.dir); err != nil {
		return fail(1, "cannot change to directory %s: %s", sp.dir, errnoText(err))
	}
	if err := keepBounding(containerCaps); err != nil {
		return fail(1, "cannot enter the machine: %v", err)
	}
	err = unix.Exec(sp.path, sp.argv, sp.env)
	code := 126
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		code = 127
	}
	return fail(code, "%s: %s", sp.path, errnoText(err))
}

// errnoText is err's text as the C library's strerror writes it ("No
// such file or directory"), the way the static form and the command's
// own tools report.
func errnoText(err error) string {
	var en unix.Errno
	if errors.As(err, &en) {
		s := en.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return err.Error()
}
