package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
//     which joins the machine's mount namespace, reads the command from
//     a sealed memory file (stageCommand: never in an argument list,
//     which any account may read), closes the descriptors it was given,
//     changes to the command's directory, empties the bounding set but
//     containerCaps, and executes the command. Root's
//     exec computes its capabilities from the bounding set, so the
//     command, and everything it starts, has at most containerCaps;
//     no_new_privs (inherited from the spawner) keeps a set-id program
//     or a file capability from raising them.
//
// The stage has two forms with one input (stageControl, stageCommand). Where
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
// machine's stage (its Go form); the stage's argument (stageControl)
// follows it.
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
	return sealedFile("aiod-stage", stageELF(stageCode), 0o711)
})

// binaryStage is this binary, open: for the Go forms of the stage and
// setid, and for a sandboxed process that executes "/proc/self/exe"
// (Wrap).
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
	return sealedFile("sandbox-init", stageELF(reaperCode), 0o711)
})

// forceGoForms makes the stage and setid their Go forms even where their
// static forms exist (tests of the Go forms set it while no process is
// starting).
var forceGoForms bool

// goStage reports whether the stage is this binary (its Go form).
func goStage() bool { return stageCode == nil || forceGoForms }

// sealedFile is a memory file holding b, sealed against any change, of
// mode: 0711 for a program (executable by every account, readable by
// none but through this descriptor, so the kernel marks a process that
// executes it not dumpable), 0600 for data.
func sealedFile(name string, b []byte, mode uint32) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: %s: %w", name, err)
	}
	if err := unix.Fchmod(fd, mode); err != nil {
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

// stageControl is the stage's argument (after its argv[0]): five bytes,
// each 0x80|fd (a NUL cannot be an argument), the numbers the child
// gives the user namespace's descriptor, the mount namespace's, the
// stage's own, the command file's (stageCommand) and nsenter's. Each
// must be from 3 to 127; the stage closes them all.
func stageControl(fds [5]int) (string, error) {
	ctl := make([]byte, 0, len(fds))
	for _, fd := range fds {
		if fd < 3 || fd > 0x7f {
			return "", fmt.Errorf("sandbox: the stage's descriptor %d is out of range", fd)
		}
		ctl = append(ctl, 0x80|byte(fd))
	}
	return string(ctl), nil
}

// stageCommand is the content of the stage's command file: the
// directory, the program path, its arguments argv (argv[0] first) and
// its environment env, as stage/stage_amd64.S reads them:
//
//	u32 len(argv), u32 len(env) (little-endian), then each string
//	ended by a NUL: dir, path, argv..., env...
//
// A file, not arguments, so that the environment (which may hold a
// secret the daemon gives a process) is in no /proc/PID/cmdline, which
// every account may read. A string with a NUL is refused.
func stageCommand(dir, path string, argv, env []string) ([]byte, error) {
	if len(argv) == 0 || len(argv) > 1<<24 || len(env) > 1<<24 {
		return nil, fmt.Errorf("sandbox: %d arguments, %d environment entries", len(argv), len(env))
	}
	n := 8
	all := append(append([]string{dir, path}, argv...), env...)
	for _, a := range all {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, errors.New("sandbox: an argument, the environment or the directory holds a NUL")
		}
		n += len(a) + 1
	}
	b := make([]byte, 0, n)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(argv)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(env)))
	for _, a := range all {
		b = append(append(b, a...), 0)
	}
	return b, nil
}

// stageSpec is what the stage was given, parsed.
type stageSpec struct {
	fds       [5]int // the user namespace, the mount namespace, the stage, the command file, nsenter
	dir, path string
	env, argv []string
}

// parseStage parses the stage's argument (stageControl) and the content
// of its command file (stageCommand), read by readCommand with the
// file's descriptor. They come from the daemon, never from the sandbox,
// but a mistake must still end in a message, not a panic.
func parseStage(args []string, readCommand func(fd int) ([]byte, error)) (stageSpec, error) {
	var sp stageSpec
	if len(args) != 1 || len(args[0]) != len(sp.fds) {
		return sp, errors.New("bad arguments")
	}
	for i := range sp.fds {
		c := args[0][i]
		if c&0x80 == 0 || c&0x7f < 3 {
			return sp, errors.New("bad control bytes")
		}
		sp.fds[i] = int(c & 0x7f)
	}
	b, err := readCommand(sp.fds[3])
	if err != nil {
		return sp, err
	}
	sp.dir, sp.path, sp.argv, sp.env, err = parseCommand(b)
	return sp, err
}

// parseCommand parses a command file (stageCommand).
func parseCommand(b []byte) (dir, path string, argv, env []string, err error) {
	if len(b) < 8 {
		return "", "", nil, nil, errors.New("a short command file")
	}
	k, m := int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
	parts := strings.Split(string(b[8:]), "\x00")
	// k+m+2 strings, each ended by a NUL: the split's last part is empty.
	if k < 1 || k > len(parts) || m > len(parts) || len(parts) != k+m+3 || parts[len(parts)-1] != "" {
		return "", "", nil, nil, errors.New("a malformed command file")
	}
	return parts[0], parts[1], parts[2 : 2+k], parts[2+k : 2+k+m], nil
}

// stage is the stage's Go form (see the comment at the top of this
// file). It returns only on failure, with the exit status, after a line
// on the standard error (the command's), as the static form writes it.
func stage(args []string) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "sandbox: "+format+"\n", a...)
		return code
	}
	sp, err := parseStage(args, func(fd int) ([]byte, error) {
		// From its start: the daemon's write left the shared offset at
		// the end.
		return io.ReadAll(io.NewSectionReader(os.NewFile(uintptr(fd), "command"), 0, 1<<40))
	})
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
