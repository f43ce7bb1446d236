package child

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Proc is one process as /proc/<pid>/stat describes it.
type Proc struct {
	PID, PPID, PGID, SID int
	State                byte
	// Start is the start time in clock ticks since boot: with the pid it
	// names one process, whatever pid reuse happens later.
	Start uint64
}

// ParseStat parses /proc/<pid>/stat. The command name is in parentheses
// and may hold spaces and parentheses itself.
func ParseStat(b []byte) (Proc, bool) {
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 1 || end < open {
		return Proc{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	fs := strings.Fields(s[end+1:])
	// From field 3 on: state ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// num_threads itrealvalue starttime(22).
	if err != nil || len(fs) < 20 || len(fs[0]) != 1 {
		return Proc{}, false
	}
	p := Proc{PID: pid, State: fs[0][0]}
	p.PPID, _ = strconv.Atoi(fs[1])
	p.PGID, _ = strconv.Atoi(fs[2])
	p.SID, _ = strconv.Atoi(fs[3])
	p.Start, _ = strconv.ParseUint(fs[19], 10, 64)
	return p, true
}

// ReadSmall reads a small /proc file into buf with three system calls
// (os.ReadFile adds a stat and allocations, on every process of a scan).
func ReadSmall(path string, buf []byte) ([]byte, bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	n, err := syscall.Read(fd, buf)
	if err != nil || n <= 0 {
		return nil, false
	}
	return buf[:n], true
}

// ReadProc reads one process's stat.
func ReadProc(pid int) (Proc, bool) {
	var buf [1024]byte
	b, ok := ReadSmall("/proc/"+strconv.Itoa(pid)+"/stat", buf[:])
	if !ok {
		return Proc{}, false
	}
	return ParseStat(b)
}

// Table is one scan of /proc: every process, and the children of each
// parent.
type Table struct {
	Procs map[int]Proc
	Kids  map[int][]int
}

// Scan reads every /proc/<pid>/stat once. Without /proc (not Linux) the
// table is empty.
func Scan() Table {
	t := Table{Procs: map[int]Proc{}, Kids: map[int][]int{}}
	d, err := os.Open("/proc")
	if err != nil {
		return t
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var buf [1024]byte
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		b, ok := ReadSmall("/proc/"+n+"/stat", buf[:])
		if !ok {
			continue // gone meanwhile
		}
		if p, ok := ParseStat(b); ok {
			t.Procs[p.PID] = p
			t.Kids[p.PPID] = append(t.Kids[p.PPID], p.PID)
		}
	}
	return t
}

// Closure adds to set, recursively, every process whose parent is in it.
func (t Table) Closure(set map[int]Proc) {
	queue := make([]int, 0, len(set))
	for pid := range set {
		queue = append(queue, pid)
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, k := range t.Kids[pid] {
			if _, ok := set[k]; !ok {
				set[k] = t.Procs[k]
				queue = append(queue, k)
			}
		}
	}
}

// Tagged is the subset of t (and its descendants) whose environment
// holds key=v for a v in values: processes that left their group and
// lost their parent, found by the variable a plane set on them. Zombies
// and the processes of skip's group are left out.
func (t Table) Tagged(key string, values map[string]bool, skipGroup int) map[int]Proc {
	set := map[int]Proc{}
	if len(values) == 0 {
		return set
	}
	self := os.Getpid()
	for pid, p := range t.Procs {
		if pid == self || p.PGID == skipGroup || p.State == 'Z' {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if v, ok := strings.CutPrefix(kv, key+"="); ok && values[v] {
				set[pid] = p
				break
			}
		}
	}
	t.Closure(set)
	return set
}
