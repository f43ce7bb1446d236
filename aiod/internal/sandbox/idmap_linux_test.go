package sandbox

import (
	"syscall"
	"testing"
)

// TestSwapMap: the mapping swaps the two ids, keeps every other id, and
// its ranges cover 0 to 2^32-2 once on each side (what uid_map accepts).
func TestSwapMap(t *testing.T) {
	lookup := func(m []syscall.SysProcIDMap, id int) (int, int) {
		n, out := 0, -1
		for _, r := range m {
			if id >= r.ContainerID && id < r.ContainerID+r.Size {
				n, out = n+1, r.HostID+id-r.ContainerID
			}
		}
		return n, out
	}
	for _, c := range []struct{ a, b int }{{1000, 65534}, {65534, 1000}, {1, 0xFFFFFFFE}, {5, 5}, {0xFFFFFFFD, 0xFFFFFFFE}} {
		m := swapMap(c.a, c.b)
		total, hosts := 0, map[int]bool{}
		for _, r := range m {
			total += r.Size
			if r.Size <= 0 {
				t.Errorf("swapMap(%d, %d): empty range %v", c.a, c.b, r)
			}
		}
		if total != 1<<32-1 || len(m) > 5 {
			t.Errorf("swapMap(%d, %d): %d ids in %d lines", c.a, c.b, total, len(m))
		}
		ids := map[int]bool{}
		for _, id := range []int{0, 1, c.a - 1, c.a, c.a + 1, c.b - 1, c.b, c.b + 1, 1<<32 - 2} {
			if id >= 0 && id <= 1<<32-2 {
				ids[id] = true
			}
		}
		for id := range ids {
			want := id
			switch id {
			case c.a:
				want = c.b
			case c.b:
				want = c.a
			}
			n, out := lookup(m, id)
			if n != 1 || out != want {
				t.Errorf("swapMap(%d, %d): %d maps to %d (%d ranges), want %d", c.a, c.b, id, out, n, want)
			}
			if hosts[out] && out >= 0 {
				t.Errorf("swapMap(%d, %d): %d is the image of two ids", c.a, c.b, out)
			}
			hosts[out] = true
		}
	}
}
