package sandbox

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The sandbox's system-call filter is Docker's default profile
// (github.com/moby/profiles/seccomp, the profile as Go data) evaluated
// for a process with no capability at all, on this machine's
// architecture and kernel, and compiled to classic BPF with
// our own assembler (seccompasm_linux.go) over
// github.com/elastic/go-seccomp-bpf's policy types and call tables (pure
// Go, no libseccomp).
//
// What that gives, in the profile's own terms: an allowlist of the
// ordinary calls; everything else answers EPERM (the process lives on).
// Among what is refused: new namespaces of any kind (clone and unshare
// with a namespace flag, setns), clone3 (answered ENOSYS, so libc falls
// back to clone, whose flags the filter can see), mount, umount2,
// pivot_root and the new mount API (fsopen, fsmount, move_mount,
// open_tree, mount_setattr), bpf, perf_event_open, the key store
// (keyctl, add_key, request_key), kernel modules, kexec, reboot,
// swapon/swapoff, settimeofday and clock_settime, userfaultfd, acct,
// quotactl, lookup_dcookie, name_to_handle_at/open_by_handle_at,
// personality other than the usual domains, and socket for address
// families outside the profile's list. ptrace is allowed (kernel ≥ 4.8,
// as Docker), within the account's own processes. Only the native
// architecture's calls pass: a 32-bit call on amd64 (int 0x80, the x32
// ABI) matches nothing and is refused.

// filterProgram is the compiled filter, built once.
var filterProgram = sync.OnceValues(func() ([]unix.SockFilter, error) { return compileProgram(false) })

// systemFilterProgram is a whole machine's filter (sandboxPolicy with
// system), built once.
var systemFilterProgram = sync.OnceValues(func() ([]unix.SockFilter, error) { return compileProgram(true) })

// compileProgram compiles the filter for this machine's architecture.
func compileProgram(system bool) ([]unix.SockFilter, error) {
	policy, err := sandboxPolicy(runtime.GOARCH, system)
	if err != nil {
		return nil, err
	}
	info, err := arch.GetInfo(runtime.GOARCH)
	if err != nil {
		return nil, fmt.Errorf("sandbox: system-call filter: %w", err)
	}
	insns, err := compileFilter(policy, info) // not policy.Assemble: see seccompasm_linux.go
	if err != nil {
		return nil, fmt.Errorf("sandbox: system-call filter: %w", err)
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("sandbox: system-call filter: %w", err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return prog, nil
}

// goArchToSeccomp names Go's architectures as the profile's includes
// and excludes do.
var goArchToSeccomp = map[string]string{"amd64": "amd64", "arm64": "arm64"}

// sandboxPolicy turns Docker's default profile, resolved for a process
// with an empty capability set, into a policy with goarch's call names
// (the library assembles it for the running architecture only; tests
// check that every name resolves on each architecture we ship): its default
// action (EPERM) for what it does not list, one group per action it
// does, refusals first (a refused name never also matches an allow).
//
// With system (a whole machine, system_linux.go) the profile is resolved
// for root's capabilities there (containerCaps, as a container's), the
// set-id refusals are not added (a package manager installs set-id
// programs; they are root inside's, in its namespace only, on a nosuid
// view), and setns is allowed for a user or a mount namespace, and
// unshare for CLONE_FS alone: how the host's nsenter and the stage take
// a new process into the sandbox's (stage_linux.go). Inside, the only
// such namespaces are the sandbox's own (clone and unshare with a
// namespace flag stay refused, and so does mount): joining them again
// changes nothing. Netlink's netfilter family is refused.
func sandboxPolicy(goarch string, system bool) (*seccompbpf.Policy, error) {
	info, err := arch.GetInfo(goarch)
	if err != nil {
		return nil, fmt.Errorf("sandbox: system-call filter: %w", err)
	}
	if _, ok := goArchToSeccomp[goarch]; !ok {
		return nil, fmt.Errorf("sandbox: no system-call filter for %s", goarch)
	}
	// The profile reads the running kernel's version for its MinKernel
	// rules (ptrace on ≥ 4.8) and picks the running architecture.
	caps := &specs.LinuxCapabilities{}
	if system {
		for _, c := range containerCapNames {
			caps.Bounding, caps.Effective, caps.Permitted = append(caps.Bounding, c), append(caps.Effective, c), append(caps.Permitted, c)
		}
	}
	spec := &specs.Spec{Process: &specs.Process{Capabilities: caps}}
	prof, err := seccomp.GetDefaultProfile(spec)
	if err != nil {
		return nil, fmt.Errorf("sandbox: system-call filter: %w", err)
	}
	if prof.DefaultAction != specs.ActErrno {
		return nil, fmt.Errorf("sandbox: system-call filter: the profile's default action is %s, not an errno", prof.DefaultAction)
	}
	type key struct{ action seccompbpf.Action }
	groups := map[key]*seccompbpf.SyscallGroup{}
	var order []key
	for _, sc := range prof.Syscalls {
		var act seccompbpf.Action
		switch sc.Action {
		case specs.ActAllow:
			act = seccompbpf.ActionAllow
		case specs.ActErrno:
			errno := uint(unix.EPERM)
			if sc.ErrnoRet != nil {
				errno = *sc.ErrnoRet
			}
			act = seccompbpf.ActionErrno | seccompbpf.Action(errno&0xffff)
		default:
			return nil, fmt.Errorf("sandbox: system-call filter: unexpected action %s for %v", sc.Action, sc.Names)
		}
		conds, err := conditions(sc.Args)
		if err != nil {
			return nil, fmt.Errorf("sandbox: system-call filter: %v: %w", sc.Names, err)
		}
		k := key{act}
		g := groups[k]
		if g == nil {
			g = &seccompbpf.SyscallGroup{Action: act}
			groups[k] = g
			order = append(order, k)
		}
		for _, name := range sc.Names {
			if _, ok := info.SyscallNames[name]; !ok {
				continue // a call of another architecture (the profile lists all)
			}
			if conds == nil {
				g.Names = appendNew(g.Names, name)
			} else {
				g.NamesWithCondtions = append(g.NamesWithCondtions, seccompbpf.NameWithConditions{Name: name, Conditions: conds})
			}
		}
	}
	p := &seccompbpf.Policy{DefaultAction: seccompbpf.ActionErrno} // EPERM
	if !system {
		p.Syscalls = append(p.Syscalls, setIDRefusals(info)...)
	} else {
		// Root inside holds a container's capabilities in its own user
		// namespace (containerCaps, bounded by the stage; see
		// stage_linux.go), NET_ADMIN not among them; nftables and
		// iptables' netlink, the kernel's most attacked surface of a
		// namespace's root, stays shut all the same.
		p.Syscalls = append(p.Syscalls, seccompbpf.SyscallGroup{Action: seccompbpf.ActionErrno | seccompbpf.Action(unix.EPERM),
			NamesWithCondtions: []seccompbpf.NameWithConditions{{Name: "socket", Conditions: seccompbpf.ArgumentConditions{
				{Argument: 0, Operation: seccompbpf.Equal, Value: unix.AF_NETLINK},
				{Argument: 2, Operation: seccompbpf.Equal, Value: unix.NETLINK_NETFILTER}}},
				// btrfs's ioctls (type 0x94 in bits 8 to 15 of the
				// request; the kernel reads 32 bits, and only the low
				// word's bits are tested): the workspace and the layers
				// are btrfs, and a subvolume or snapshot made inside
				// would escape the machine's snapshots and its quota.
				{Name: "ioctl", Conditions: seccompbpf.ArgumentConditions{
					{Argument: 1, Operation: seccompbpf.BitsSet, Value: 0x8000},
					{Argument: 1, Operation: seccompbpf.BitsSet, Value: 0x1000},
					{Argument: 1, Operation: seccompbpf.BitsSet, Value: 0x0400},
					{Argument: 1, Operation: seccompbpf.BitsNotSet, Value: 0x6b00}}}}})
	}
	for _, refusals := range []bool{true, false} {
		for _, k := range order {
			if (k.action != seccompbpf.ActionAllow) == refusals {
				p.Syscalls = append(p.Syscalls, *groups[k])
			}
		}
	}
	if system {
		p.Syscalls = append(p.Syscalls, seccompbpf.SyscallGroup{Action: seccompbpf.ActionAllow,
			NamesWithCondtions: []seccompbpf.NameWithConditions{
				{Name: "setns", Conditions: seccompbpf.ArgumentConditions{{Argument: 1, Operation: seccompbpf.Equal, Value: unix.CLONE_NEWUSER}}},
				{Name: "setns", Conditions: seccompbpf.ArgumentConditions{{Argument: 1, Operation: seccompbpf.Equal, Value: unix.CLONE_NEWNS}}},
				// The stage's own file-system attributes, which a
				// mount namespace's join needs (stage_linux.go): no
				// namespace, no privilege.
				{Name: "unshare", Conditions: seccompbpf.ArgumentConditions{{Argument: 0, Operation: seccompbpf.Equal, Value: unix.CLONE_FS}}},
			}})
	}
	return p, nil
}

// containerCapNames are containerCaps as the profile names them.
var containerCapNames = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}

// setIDModeArg is, for each call that takes a file mode, which argument
// holds it.
var setIDModeArg = map[string]uint32{
	"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2,
	"mkdir": 1, "mkdirat": 2, "open": 2, "openat": 3, "creat": 1,
}

// setIDRefusals are refusals beyond Docker's profile: no file mode with
// the set-user-ID or set-group-ID bit. The workspace is the user's own
// folder on the host (idmapped to its owner, or given to the account),
// and nosuid on the sandbox's mount of it does nothing for the host's
// view: a command that ran `cp /bin/id x; chmod 6755 x` there left a
// program that ran as the folder's owner for any local account (a
// red-team pass). A mode with either bit is answered EPERM on every call
// that sets one (chmod, fchmod, fchmodat, fchmodat2, mkdir, mkdirat, and
// open, openat and creat, whose mode only counts with O_CREAT; C
// libraries pass 0 otherwise); openat2, whose mode sits in a structure
// the filter cannot read, is answered ENOSYS, as by a kernel before 5.6,
// so callers fall back to openat. mknod is refused by the profile.
func setIDRefusals(info *arch.Info) []seccompbpf.SyscallGroup {
	refuse := seccompbpf.SyscallGroup{Action: seccompbpf.ActionErrno | seccompbpf.Action(unix.EPERM)}
	names := make([]string, 0, len(setIDModeArg))
	for name := range setIDModeArg {
		names = append(names, name)
	}
	slices.Sort(names) // one program for one architecture, whatever the map's order
	for _, name := range names {
		if _, ok := info.SyscallNames[name]; !ok {
			continue // chmod, mkdir, open and creat are absent on arm64
		}
		// BitsSet is any of the value's bits (BPF's JSET).
		refuse.NamesWithCondtions = append(refuse.NamesWithCondtions, seccompbpf.NameWithConditions{Name: name,
			Conditions: seccompbpf.ArgumentConditions{{Argument: setIDModeArg[name], Operation: seccompbpf.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}})
	}
	groups := []seccompbpf.SyscallGroup{refuse}
	if _, ok := info.SyscallNames["openat2"]; ok {
		groups = append(groups, seccompbpf.SyscallGroup{Action: seccompbpf.ActionErrno | seccompbpf.Action(unix.ENOSYS), Names: []string{"openat2"}})
	}
	return groups
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// conditions translates the profile's argument comparisons (all of one
// rule must hold, as libseccomp reads them) into the library's.
func conditions(args []specs.LinuxSeccompArg) (seccompbpf.ArgumentConditions, error) {
	if len(args) == 0 {
		return nil, nil
	}
	var out seccompbpf.ArgumentConditions
	for _, a := range args {
		c := seccompbpf.Condition{Argument: uint32(a.Index), Value: a.Value}
		switch a.Op {
		case specs.OpEqualTo:
			c.Operation = seccompbpf.Equal
		case specs.OpNotEqual:
			c.Operation = seccompbpf.NotEqual
		case specs.OpLessThan:
			c.Operation = seccompbpf.LessThan
		case specs.OpLessEqual:
			c.Operation = seccompbpf.LessOrEqual
		case specs.OpGreaterThan:
			c.Operation = seccompbpf.GreaterThan
		case specs.OpGreaterEqual:
			c.Operation = seccompbpf.GreaterOrEqual
		case specs.OpMaskedEqual:
			// arg & Value == ValueTwo: the profile uses it only as "none
			// of these bits" (clone's namespace flags), ValueTwo 0.
			if a.ValueTwo != 0 {
				return nil, fmt.Errorf("masked comparison with %#x", a.ValueTwo)
			}
			c.Operation = seccompbpf.BitsNotSet
		default:
			return nil, fmt.Errorf("comparison %s", a.Op)
		}
		out = append(out, c)
	}
	return out, nil
}

// installFilter installs the filter on the calling thread (tsync false:
// the spawner thread, whose children inherit it) or on every thread of
// the process. The caller has set no_new_privs.
func installFilter(tsync bool) error {
	return installFilterOf(filterProgram, tsync)
}

// installFilterOf installs the program compile gives, as installFilter.
func installFilterOf(compile func() ([]unix.SockFilter, error), tsync bool) error {
	prog, err := compile()
	if err != nil {
		return err
	}
	return installProgram(prog, tsync)
}

// installProgram installs prog as installFilter says.
func installProgram(prog []unix.SockFilter, tsync bool) error {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	var flags uintptr
	if tsync {
		flags = unix.SECCOMP_FILTER_FLAG_TSYNC
	}
	r, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if e != 0 {
		return fmt.Errorf("sandbox: installing the system-call filter: %w", e)
	}
	if r != 0 {
		return fmt.Errorf("sandbox: installing the system-call filter: thread %d could not take it", r)
	}
	return nil
}

// The daemon hands its compiled filter to each sandbox's init (through a
// pipe, initSpec.FilterFD) rather than have every init evaluate the
// profile and compile it again (about 1.3 ms of a sandbox's start, the
// same work for every sandbox). The encoding is the kernel's own: 8
// bytes per instruction (code, jt, jf, k), in the machine's byte order.

// encodeFilter writes prog as the kernel lays out struct sock_filter.
func encodeFilter(prog []unix.SockFilter) []byte {
	b := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		b = binary.NativeEndian.AppendUint16(b, in.Code)
		b = append(b, in.Jt, in.Jf)
		b = binary.NativeEndian.AppendUint32(b, in.K)
	}
	return b
}

// decodeFilter reads what encodeFilter wrote: a whole number of
// instructions, at least one and at most the kernel's BPF_MAXINSNS.
func decodeFilter(b []byte) ([]unix.SockFilter, error) {
	if len(b) == 0 || len(b)%8 != 0 || len(b)/8 > 4096 {
		return nil, fmt.Errorf("sandbox: system-call filter of %d bytes", len(b))
	}
	prog := make([]unix.SockFilter, len(b)/8)
	for i := range prog {
		r := b[8*i:]
		prog[i] = unix.SockFilter{Code: binary.NativeEndian.Uint16(r), Jt: r[2], Jf: r[3], K: binary.NativeEndian.Uint32(r[4:])}
	}
	return prog, nil
}

// readFilter reads the filter the daemon sent on fd, and closes fd.
func readFilter(fd int) ([]unix.SockFilter, error) {
	f := os.NewFile(uintptr(fd), "filter")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 8*4096+1))
	if err != nil {
		return nil, fmt.Errorf("sandbox: reading the system-call filter: %w", err)
	}
	return decodeFilter(b)
}
