//go:build linux

package watch

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// pseudoFSTypes are the kernel's virtual filesystems: watching them
// reports nothing useful (or floods), and /proc and /sys alone hold tens
// of thousands of directories.
var pseudoFSTypes = map[string]bool{
	"proc": true, "sysfs": true, "devtmpfs": true, "devpts": true, "cgroup": true, "cgroup2": true,
	"debugfs": true, "tracefs": true, "securityfs": true, "pstore": true, "bpf": true, "configfs": true,
	"fusectl": true, "mqueue": true, "hugetlbfs": true, "binfmt_misc": true, "efivarfs": true,
	"selinuxfs": true, "rpc_pipefs": true, "nsfs": true, "nfsd": true,
}

// mountTable tells which devices (st_dev) are pseudo filesystems, from
// /proc/self/mountinfo. It is read again by every create and when a walk
// meets a device it does not know (a mount made since).
type mountTable struct {
	mu     sync.Mutex
	pseudo map[uint64]bool // device → a pseudo filesystem; unknown devices cached as false
	info   string          // the mount table read; "" is /proc/self/mountinfo
}

// sandboxed makes the table the sandbox's: /proc/1/mountinfo, read in
// the sandbox's view (its /proc is its PID namespace's, where the
// daemon's own /proc/self does not exist and init is 1). Every read
// happens in the view: from the walks and the create that run there.
func (m *mountTable) sandboxed() { m.info = "/proc/1/mountinfo" }

// refresh reads the mount table again. Without it (no /proc) every
// device counts as a real filesystem.
func (m *mountTable) refresh() { m.reread(false) }

// reread reads the mount table; with keepUnknown the devices it does not
// list (btrfs subvolumes, say) stay known as real filesystems, so a walk
// across several of them does not read the table again and again.
func (m *mountTable) reread(keepUnknown bool) {
	info := m.info
	if info == "" {
		info = "/proc/self/mountinfo"
	}
	b, err := os.ReadFile(info)
	next := parseMountinfo(b, err)
	m.mu.Lock()
	defer m.mu.Unlock()
	if keepUnknown {
		for dev, p := range m.pseudo {
			if _, ok := next[dev]; !ok && !p {
				next[dev] = false
			}
		}
	}
	m.pseudo = next
}

func parseMountinfo(b []byte, err error) map[uint64]bool {
	out := map[uint64]bool{}
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional…] - fstype source super
		f := strings.Fields(sc.Text())
		if len(f) < 7 {
			continue
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) {
			continue
		}
		majS, minS, ok := strings.Cut(f[2], ":")
		maj, err1 := strconv.ParseUint(majS, 10, 32)
		mnr, err2 := strconv.ParseUint(minS, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		out[unix.Mkdev(uint32(maj), uint32(mnr))] = pseudoFSTypes[f[sep+1]]
	}
	return out
}

// isPseudo reports whether dev is a pseudo filesystem; an unknown device
// makes it read the mount table again once.
func (m *mountTable) isPseudo(dev uint64) bool {
	m.mu.Lock()
	p, ok := m.pseudo[dev]
	m.mu.Unlock()
	if ok {
		return p
	}
	m.reread(true)
	m.mu.Lock()
	defer m.mu.Unlock()
	p = m.pseudo[dev]
	m.pseudo[dev] = p
	return p
}

// pseudoEntry reports whether the directory d is on a pseudo filesystem
// (true too when it vanished: there is nothing to watch).
func (m *mountTable) pseudoEntry(d fs.DirEntry) bool {
	fi, err := d.Info()
	if err != nil {
		return true
	}
	return m.pseudoInfo(fi)
}

// pseudoPath reports whether p is on a pseudo filesystem.
func (m *mountTable) pseudoPath(p string) bool {
	fi, err := os.Lstat(p)
	if err != nil {
		return false
	}
	return m.pseudoInfo(fi)
}

func (m *mountTable) pseudoInfo(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return m.isPseudo(uint64(st.Dev)) //nolint:unconvert // uint32 on some architectures
}
