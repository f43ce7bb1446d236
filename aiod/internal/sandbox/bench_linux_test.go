package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkStart is the cost of a command's start and end in the
// sandbox: /bin/true started through Wrap and waited for (with the
// filter, a start includes the hold at exec and the placement in the
// cgroup), in a plain sandbox and in a whole machine (whose start adds
// nsenter and the stage, stage_linux.go).
func BenchmarkStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("namespaces need root")
	}
	for _, machine := range []bool{false, true} {
		name := "plain"
		cfg := Config{Workspace: b.TempDir(), Pids: 256}
		if machine {
			name = "machine"
			mask, err := testMask()
			if err != nil {
				b.Fatal(err)
			}
			const base = 2_100_500_000
			cfg.UID, cfg.GID, cfg.UserName, cfg.Network = base, base, "root", NetworkNone
			cfg.System = &System{IDs: base, Upper: filepath.Join(b.TempDir(), "upper"), Mask: mask}
		}
		b.Run(name, func(b *testing.B) {
			s, err := New(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var took []time.Duration
			for b.Loop() {
				t0 := time.Now()
				cmd := exec.Command("/bin/true")
				if err := s.Wrap(cmd, cmd.Start)(); err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
			}
			b.ReportMetric(p50(took), "p50-µs")
		})
	}
}

// p50 is the median of took, in microseconds.
func p50(took []time.Duration) float64 {
	slices.Sort(took)
	return float64(took[len(took)/2].Microseconds())
}

// BenchmarkNew is the cost of starting a sandbox and closing it (init
// builds the view; with the filter it then executes itself again
// confined), with the host's network and with one of its own. Under
// network none it also reports its median over the kernel's floor
// (floor), the target of a pool's cold create being at most 3x.
func BenchmarkNew(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("namespaces need root")
	}
	for _, network := range []string{NetworkHost, NetworkNone} {
		b.Run(network, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				t0 := time.Now()
				s, err := New(Config{Workspace: b.TempDir(), Network: network}, nil)
				if err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
				s.Close()
			}
			b.ReportMetric(p50(took), "p50-µs")
			if network == NetworkNone {
				var fl []time.Duration
				for range 20 {
					fl = append(fl, floor(b))
				}
				b.ReportMetric(p50(took)/p50(fl), "x-floor")
			}
		})
	}
}

// BenchmarkFloor is the kernel's floor for a sandbox's start: /bin/true
// cloned with the sandbox's namespace flags (mount, PID, IPC, UTS,
// network) into a fresh cgroup of the sandbox's controllers, waited
// for, and the cgroup removed. Nothing of the view is built.
func BenchmarkFloor(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("namespaces need root")
	}
	var took []time.Duration
	for b.Loop() {
		took = append(took, floor(b))
	}
	b.ReportMetric(p50(took), "p50-µs")
}

// floor runs the floor of BenchmarkFloor once and returns its time.
func floor(b *testing.B) time.Duration {
	b.Helper()
	l, err := layout()
	if err != nil {
		b.Skip("no cgroups:", err)
	}
	name := "aiod-sandbox-" + strconv.Itoa(os.Getpid()) + "-floor"
	t0 := time.Now()
	var dirs []string
	ctls := append([]string{""}, append(cgroupV1Controllers, cgroupV1Optional...)...)
	if cgroupVersion() == "v1" {
		ctls = ctls[1:]
	} else {
		ctls = ctls[:1]
	}
	for _, ctl := range ctls {
		base, ok := dirOf(l.mounts, l.own, ctl)
		if d := filepath.Join(base, name); ok && !slices.Contains(dirs, d) {
			if err := os.Mkdir(d, 0o755); err != nil {
				b.Fatal(err)
			}
			dirs = append(dirs, d)
		}
	}
	attr := &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWNET}
	var cgfd int = -1
	if len(ctls) == 1 && ctls[0] == "" { // v2: born in the group
		if cgfd, err = unix.Open(dirs[0], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			b.Fatal(err)
		}
		attr.UseCgroupFD, attr.CgroupFD = true, cgfd
	}
	cmd := &exec.Cmd{Path: "/bin/true", Args: []string{"true"}, SysProcAttr: attr}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if cgfd < 0 { // v1: moved in once started (it may be done already)
		for _, d := range dirs {
			_ = os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0)
		}
	} else {
		unix.Close(cgfd)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	for _, d := range dirs {
		for {
			err := os.Remove(d)
			if err == nil || !errors.Is(err, unix.EBUSY) {
				break
			}
		}
	}
	return time.Since(t0)
}

// BenchmarkPauseResume is a pause and a resume of a sandbox running a
// busy loop and a sleeper; it reports the median of the pair and of
// the pause alone.
func BenchmarkPauseResume(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("namespaces need root")
	}
	s, err := New(Config{Workspace: b.TempDir()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if !s.cg.canFreeze() {
		b.Skip("no cgroup freezer here")
	}
	for _, argv := range [][]string{{"/bin/sh", "-c", "while :; do :; done"}, {"/bin/sleep", "600"}} {
		cmd := exec.Command(argv[0], argv[1:]...)
		if err := s.Wrap(cmd, cmd.Start)(); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	}
	var pair, pause []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := s.Pause(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := s.Resume(); err != nil {
			b.Fatal(err)
		}
		pair, pause = append(pair, time.Since(t0)), append(pause, t1.Sub(t0))
	}
	b.ReportMetric(p50(pair), "p50-µs")
	b.ReportMetric(p50(pause), "pause-p50-µs")
}
