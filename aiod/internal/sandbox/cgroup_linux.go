package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// cgroups is the sandbox's control group: one directory on cgroup v2, or
// one per controller (memory, pids, cpu, and cpuacct and freezer where
// the machine has them) on v1.
//
// On v2 a process is born in it (clone3 with CLONE_INTO_CGROUP, through
// SysProcAttr.UseCgroupFD) or held at its exec and moved in
// (spawn_linux.go). v1 has no such flag, so the daemon's spawner thread
// joins the pids, cpu and cpuacct groups itself (v1 groups hold
// threads, and a child is born in its parent thread's groups): a fork
// bomb counts from its first fork. The memory and freezer groups are
// never joined that way: the kernel's OOM killer would count the daemon
// among the sandbox's tasks, and the freezer would stop a thread of the
// daemon (see Sandbox.Pause). A process is moved into them as it
// starts, and [cgroups.sweep] moves any process that forked before its
// parent was moved.
type cgroups struct {
	v2   string            // the v2 directory, or ""
	v2fd int               // O_PATH descriptor of v2, for CLONE_INTO_CGROUP
	v1   map[string]string // controller -> directory
	base map[string]string // v1 controller -> the daemon's own group, where a thread goes back
	// files are opened on the host for the threads inside the sandbox's
	// mount namespace, which has no /sys (see openFiles).
	files threadFiles
	// joined counts the daemon's threads (spawners) in the v1 pids
	// group, which the group's pids.current counts with the sandbox's
	// own tasks (see usage).
	joined atomic.Int32
}

// cgroupV1Controllers are the v1 controllers the sandbox needs;
// cgroupV1Optional those it uses where the machine has them (cpuacct
// for the CPU time of Usage, freezer for Pause).
var (
	cgroupV1Controllers = []string{"memory", "pids", "cpu"}
	cgroupV1Optional    = []string{"cpuacct", "freezer"}
)

// joinedV1 are the v1 controllers whose groups the spawner thread
// joins, placedV1 those a new process is moved into (never the
// freezer's or memory's for a thread of the daemon: see cgroups).
var (
	joinedV1 = []string{"pids", "cpu", "cpuacct"}
	placedV1 = []string{"memory", "freezer"}
)

// dirs returns the distinct directories of the v1 controllers ctls
// that c has, in order (controllers mounted together share one).
func (c *cgroups) dirs(ctls []string) []string {
	var out []string
	for _, ctl := range ctls {
		if d, ok := c.v1[ctl]; ok && !contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// mountinfo lists the cgroup mounts: fstype "cgroup2" under key "", and
// each v1 controller under its name; the value is the mount point and
// the mount's root within the hierarchy.
func cgroupMounts() (map[string][2]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][2]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		root, point := unescapeMount(pf[3]), unescapeMount(pf[4])
		switch qf[0] {
		case "cgroup2":
			if _, seen := out[""]; !seen {
				out[""] = [2]string{point, root}
			}
		case "cgroup":
			for _, opt := range strings.Split(qf[2], ",") {
				if opt == "rw" || opt == "ro" {
					continue // mount options, not controllers
				}
				if _, seen := out[opt]; !seen {
					out[opt] = [2]string{point, root}
				}
			}
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroups reads /proc/self/cgroup: controller ("" for v2) -> path.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// dirOf is where the daemon's own group of controller c ("" for v2) is.
func dirOf(mounts map[string][2]string, own map[string]string, c string) (string, bool) {
	m, ok := mounts[c]
	p, ok2 := own[c]
	if !ok || !ok2 {
		return "", false
	}
	rel := p
	if m[1] != "/" {
		if !strings.HasPrefix(p, m[1]) {
			return "", false
		}
		rel = strings.TrimPrefix(p, m[1])
	}
	return filepath.Join(m[0], rel), true
}

// layout is the cgroup mounts and the daemon's own groups, read once per
// process: they are the same for every sandbox, and the daemon's own
// group must be the one it started in (on v2 New moves the daemon into
// a leaf below it, which must not become the next sandbox's parent).
var layout = sync.OnceValues(func() (cgroupLayout, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return cgroupLayout{}, err
	}
	own, err := ownCgroups()
	if err != nil {
		return cgroupLayout{}, err
	}
	return cgroupLayout{mounts: mounts, own: own}, nil
})

type cgroupLayout struct {
	mounts map[string][2]string
	own    map[string]string
}

// cgroupVersion says which version the machine offers for the sandbox's
// controllers: "v2", "v1" or "".
func cgroupVersion() string {
	l, err := layout()
	if err != nil {
		return ""
	}
	mounts, own := l.mounts, l.own
	if d, ok := dirOf(mounts, own, ""); ok {
		if b, err := os.ReadFile(filepath.Join(d, "cgroup.controllers")); err == nil {
			have := strings.Fields(string(b))
			if contains(have, "memory") && contains(have, "pids") {
				return "v2"
			}
		}
	}
	for _, c := range cgroupV1Controllers {
		if _, ok := dirOf(mounts, own, c); !ok {
			return ""
		}
	}
	return "v1"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// newCgroups creates the sandbox's group(s), named name, with cfg's
// limits.
// name, with cfg's limits. A group of that name that exists already is
// an error when cfg names it (another sandbox of this daemon has it).
func newCgroups(cfg Config, name string) (*cgroups, error) {
	l, err := layout()
	if err != nil {
		return nil, err
	}
	mounts, own := l.mounts, l.own
	switch cgroupVersion() {
	case "v2":
		base, _ := dirOf(mounts, own, "")
		removeStaleOnce(base)
		return newCgroupV2(cfg, base, name)
	case "v1":
		c := &cgroups{v1: map[string]string{}, base: map[string]string{}, v2fd: -1}
		for _, ctl := range append(cgroupV1Controllers, cgroupV1Optional...) {
			base, ok := dirOf(mounts, own, ctl)
			if !ok {
				continue // an optional one (the required were checked by cgroupVersion)
			}
			removeStaleOnce(base)
			c.base[ctl] = base
			dir := filepath.Join(base, name)
			if contains(c.dirs(cgroupV1Controllers), dir) || contains(c.dirs(cgroupV1Optional), dir) {
				c.v1[ctl] = dir // mounted with a controller done already (cpu,cpuacct)
				continue
			}
			if err := os.Mkdir(dir, 0o755); err != nil && !(errors.Is(err, os.ErrExist) && cfg.Name == "") {
				c.remove()
				return nil, fmt.Errorf("cgroup v1 %s: %w", ctl, err)
			}
			c.v1[ctl] = dir
		}
		if err := c.limitV1(cfg); err != nil {
			c.remove()
			return nil, err
		}
		return c, nil
	}
	return nil, errors.New("no cgroup hierarchy with the memory and pids controllers")
}

func newCgroupV2(cfg Config, base, name string) (*cgroups, error) {
	want := "+memory +pids"
	if b, err := os.ReadFile(filepath.Join(base, "cgroup.controllers")); err == nil && contains(strings.Fields(string(b)), "cpu") {
		want += " +cpu"
	}
	if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte(want), 0); err != nil {
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		// "No internal processes": the daemon's group holds processes,
		// so it cannot hand controllers down until the daemon moves into
		// a leaf of its own.
		leaf := filepath.Join(base, "aiod-daemon")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte("0"), 0); err != nil {
			return nil, fmt.Errorf("cgroup v2: moving the daemon to a leaf: %w", err)
		}
		if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte(want), 0); err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !(errors.Is(err, os.ErrExist) && cfg.Name == "") {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	c := &cgroups{v2: dir, v2fd: -1}
	w := func(file, v string) error { return os.WriteFile(filepath.Join(dir, file), []byte(v), 0) }
	mem, pids, cpu := "max", "max", "max 100000"
	if cfg.Memory > 0 {
		mem = strconv.FormatInt(cfg.Memory, 10)
	}
	if cfg.Pids > 0 {
		pids = strconv.Itoa(cfg.Pids)
	}
	if cfg.CPUs > 0 {
		cpu = strconv.Itoa(int(cfg.CPUs*100000)) + " 100000"
	}
	for _, kv := range [][2]string{{"memory.max", mem}, {"pids.max", pids}, {"cpu.max", cpu}} {
		if err := w(kv[0], kv[1]); err != nil && !(kv[0] == "cpu.max" && errors.Is(err, os.ErrNotExist)) {
			c.remove()
			return nil, fmt.Errorf("cgroup v2 %s: %w", kv[0], err)
		}
	}
	_ = w("memory.swap.max", "0") // absent without swap accounting
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.remove()
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	c.v2fd = fd
	return c, nil
}

func (c *cgroups) limitV1(cfg Config) error {
	w := func(ctl, file, v string) error {
		return os.WriteFile(filepath.Join(c.v1[ctl], file), []byte(v), 0)
	}
	mem, pids, quota := "-1", "max", "-1"
	if cfg.Memory > 0 {
		mem = strconv.FormatInt(cfg.Memory, 10)
	}
	if cfg.Pids > 0 {
		pids = strconv.Itoa(cfg.Pids)
	}
	if cfg.CPUs > 0 {
		quota = strconv.Itoa(int(cfg.CPUs * 100000))
	}
	_ = w("memory", "memory.move_charge_at_immigrate", "3") // what a process brings along is charged here (deprecated on new kernels)
	if err := w("memory", "memory.limit_in_bytes", mem); err != nil {
		return fmt.Errorf("cgroup v1 memory limit: %w", err)
	}
	_ = w("memory", "memory.memsw.limit_in_bytes", mem) // absent without swap accounting
	if err := w("pids", "pids.max", pids); err != nil {
		return fmt.Errorf("cgroup v1 pids limit: %w", err)
	}
	if err := w("cpu", "cpu.cfs_period_us", "100000"); err != nil {
		return fmt.Errorf("cgroup v1 cpu period: %w", err)
	}
	if err := w("cpu", "cpu.cfs_quota_us", quota); err != nil {
		return fmt.Errorf("cgroup v1 cpu quota: %w", err)
	}
	return nil
}

// joinThread makes the calling OS thread (locked by the caller) a member
// of the v1 pids, cpu and cpuacct groups, so what it forks is born
// there. Never the freezer's: see cgroups.
func (c *cgroups) joinThread() error {
	if c == nil || c.v1 == nil {
		return nil
	}
	tid := strconv.Itoa(unix.Gettid())
	c.joined.Add(1)
	for _, d := range c.dirs(joinedV1) {
		if err := os.WriteFile(filepath.Join(d, "tasks"), []byte(tid), 0); err != nil {
			c.leaveThread()
			return fmt.Errorf("cgroup v1 %s: joining: %w", d, err)
		}
	}
	return nil
}

// leaveThread sends the calling thread back to the daemon's own v1
// groups. A locked goroutine's thread normally ends with it, but the
// main thread is kept forever instead, and a group cannot be removed
// while a thread is in it.
func (c *cgroups) leaveThread() {
	if c == nil || c.v1 == nil {
		return
	}
	tid := []byte(strconv.Itoa(unix.Gettid()))
	for _, f := range c.files.baseTasks {
		_, _ = f.Write(tid)
	}
	c.joined.Add(-1)
}

// removedStale holds the cgroup parents removeStaleOnce has swept.
var removedStale sync.Map

// removeStaleOnce is removeStale, once per parent and process: a dead
// daemon's leftovers are there when this one starts, and sweeping a
// parent that holds a pool's hundreds of groups at every New cost more
// than the rest of New's cgroup work.
func removeStaleOnce(base string) {
	if _, done := removedStale.LoadOrStore(base, true); !done {
		removeStale(base)
	}
}

// removeStale removes the groups of sandboxes whose daemon is gone (one
// killed before it could clean up); a group still holding a process is
// left alone (rmdir refuses it).
func removeStale(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && ofDeadDaemon(e.Name()) {
			_ = os.Remove(filepath.Join(base, e.Name()))
		}
	}
}

// oomKills is how many processes the kernel has killed for reaching the
// sandbox's memory limit.
func (c *cgroups) oomKills() uint64 {
	if c == nil {
		return 0
	}
	file := filepath.Join(c.v2, "memory.events")
	if c.v1 != nil {
		file = filepath.Join(c.v1["memory"], "memory.oom_control")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// place moves a process that has just started into the v1 memory and
// freezer groups. It refuses the daemon itself: cgroup.procs moves the
// whole thread group of the pid written, so a number that named one of
// the daemon's threads would move the daemon (into a group the freezer
// may stop, or the memory limit may kill). PIDs are allocated in a
// cycle, so a process's number is not reused by a thread between the
// read of a group's list and this write short of the whole PID space
// going round; the check still names the rule.
func (c *cgroups) place(pid int) error {
	if c == nil || c.v1 == nil {
		return nil
	}
	if ownTask(pid) {
		return fmt.Errorf("sandbox: %d is the daemon's own", pid)
	}
	for _, d := range c.dirs(placedV1) {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return err
		}
	}
	return nil
}

// ownTask reports whether id is this process or one of its threads.
func ownTask(id int) bool {
	if id == os.Getpid() {
		return true
	}
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(id))
	return err == nil
}

// sweep moves into the v1 memory and freezer groups every process of the
// pids group that is not in both yet (one that forked before its parent
// was placed), except the daemon, whose spawner thread is a member of
// the pids group. It reports how many it moved.
func (c *cgroups) sweep() int {
	if c == nil || c.v1 == nil {
		return 0
	}
	var in []map[int]struct{}
	for _, d := range c.dirs(placedV1) {
		in = append(in, procs(d))
	}
	self, moved := os.Getpid(), 0
	for pid := range procs(c.v1["pids"]) {
		if pid == self {
			continue
		}
		for _, m := range in {
			if _, ok := m[pid]; !ok {
				if c.place(pid) == nil {
					moved++
				}
				break
			}
		}
	}
	return moved
}

func procs(dir string) map[int]struct{} {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	out := map[int]struct{}{}
	if err != nil {
		return out
	}
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out[n] = struct{}{}
		}
	}
	return out
}

// remove deletes the groups once their processes are gone (waiting up to
// a second for the kernel to finish tearing the PID namespace down).
func (c *cgroups) remove() {
	if c == nil {
		return
	}
	if c.v2fd >= 0 {
		unix.Close(c.v2fd)
		c.v2fd = -1
	}
	c.files.close()
	dirs := []string{}
	if c.v2 != "" {
		dirs = append(dirs, c.v2)
	}
	for _, d := range c.v1 {
		dirs = append(dirs, d)
	}
	deadline := time.Now().Add(time.Second)
	for _, d := range dirs {
		for {
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
