package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// BenchmarkStart is the cost of a command's start and end in the
// sandbox: /bin/true started through Wrap and waited for (with the
// filter, a start includes the hold at exec and the placement in the
// cgroup).
func BenchmarkStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("namespaces need root")
	}
	s, err := New(Config{Workspace: b.TempDir(), Pids: 256}, nil)
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
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
}

// BenchmarkNew is the cost of starting a sandbox (init builds the view;
// with the filter it then executes itself again confined).
func BenchmarkNew(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("namespaces need root")
	}
	for b.Loop() {
		s, err := New(Config{Workspace: b.TempDir()}, nil)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
