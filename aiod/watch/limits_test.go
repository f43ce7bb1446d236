package watch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuf collects a logger's lines across goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLog() (*slog.Logger, *logBuf) {
	b := &logBuf{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// A poll whose cursor is past the latest seq answers the events that
// come while it waits (the cursor is clamped once, not on every look).
func TestPollCursorPastLatest(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.create(nil).WatcherID
	e.write("a", "1")
	e.expect(id, 0, "create a", "write a")

	if res := e.poll(id, 99999, 0); len(res.Events) != 0 || res.Cursor != 2 || res.Overflow {
		t.Fatalf("no wait: %+v", res)
	}
	for _, v1 := range []bool{false, true} {
		var latest uint64
		for _, w := range e.plane.e.List() {
			latest = w.LatestSeq
		}
		done := make(chan PollWatchResult, 1)
		go func() {
			var res PollWatchResult
			if v1 {
				e.OK("POST", "/v1/file/watch/"+id+"/poll", map[string]any{"cursor": 99999, "timeout": 10}, &res)
			} else {
				e.OK("GET", "/v2/watch/"+id+"/poll?cursor=99999&timeout=10", nil, &res)
			}
			done <- res
		}()
		e.waiting(1)
		name := fmt.Sprint("b", v1)
		e.write(name, "22")
		select {
		case res := <-done:
			if len(res.Events) == 0 || res.Events[0].Seq != latest+1 || line(res.Events[0]) != "create "+name ||
				res.Cursor != res.Events[len(res.Events)-1].Seq || res.Overflow {
				t.Fatalf("v1 %v: %+v", v1, res)
			}
			e.expect(id, res.Cursor, []string{"create " + name, "write " + name}[len(res.Events):]...)
		case <-time.After(15 * time.Second):
			t.Fatalf("v1 %v: the poll never answered", v1)
		}
	}
}

// A stream resuming from a Last-Event-ID (or ?cursor=) past the latest
// seq starts at the latest and delivers what follows.
func TestStreamCursorPastLatest(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.create(nil).WatcherID
	e.write("a", "1")
	e.expect(id, 0, "create a", "write a")
	for i, c := range []struct {
		path   string
		header map[string]string
	}{
		{"/v2/watch/" + id + "/events", map[string]string{"Last-Event-ID": id + ":99999"}},
		{"/v1/file/watch/" + id + "/events", map[string]string{"Last-Event-ID": "99999"}},
		{"/v2/watch/" + id + "/events?cursor=99999", nil},
	} {
		s := e.stream(c.path, c.header)
		f := s.must(t)
		var started struct{ Cursor uint64 }
		if f.event != "watch_started" || json.Unmarshal([]byte(f.data), &started) != nil || started.Cursor != uint64(2+i) {
			t.Fatalf("%s: first frame %+v", c.path, f)
		}
		name := fmt.Sprint("n", i)
		e.fs(os.Mkdir(e.path(name), 0o755)) // one event: create
		s.change(t, fmt.Sprint(id, ":", 3+i), "create "+name+"/")
	}
}

// timeout is 0–60 on both poll routes; beyond is a 400 at once.
func TestPollTimeoutRange(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.create(nil).WatcherID
	const msg = "timeout must be between 0 and 60 seconds"
	start := time.Now()
	if code, r := e.call("GET", "/v2/watch/"+id+"/poll?timeout=61", nil); code != http.StatusBadRequest || r.Success || r.Message != msg {
		t.Fatalf("v2 61: %d %q", code, r.Message)
	}
	if code, r := e.call("POST", "/v1/file/watch/"+id+"/poll", map[string]any{"timeout": 61}); code != http.StatusBadRequest || r.Success || r.Message != msg {
		t.Fatalf("v1 61: %d %q", code, r.Message)
	}
	if code, r := e.call("GET", "/v2/watch/"+id+"/poll?timeout=18446744073709551615", nil); code != http.StatusBadRequest || r.Message != msg {
		t.Fatalf("v2 max: %d %q", code, r.Message)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("an out-of-range timeout waited")
	}
	e.write("a", "")
	e.expect(id, 0, "create a")
	var res PollWatchResult // 60 is in range (and answers at once: there is history)
	e.OK("GET", "/v2/watch/"+id+"/poll?timeout=60", nil, &res)
	e.OK("POST", "/v1/file/watch/"+id+"/poll", map[string]any{"timeout": 60}, &res)
	if len(res.Events) != 1 {
		t.Fatalf("timeout 60: %+v", res)
	}
}

// mkTree makes n directories under root, fanout per level.
func mkTree(t testing.TB, root string, n, fanout int) {
	t.Helper()
	dirs := []string{root}
	for made := 0; made < n; {
		next := dirs[0]
		dirs = dirs[1:]
		for i := 0; i < fanout && made < n; i++ {
			d := filepath.Join(next, fmt.Sprint("d", i))
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, d)
			made++
		}
	}
}

// A tree with more directories than Config.MaxWatchDirs is watched up to
// the cap: the watcher runs, the create's message and the log say so
// (once), and it never holds more.
func TestDirLimit(t *testing.T) {
	log, buf := newLog()
	e := newEnv(t, Config{MaxWatchDirs: 100, Logger: log})
	mkTree(t, e.dir, 300, 6)
	code, r := e.call("POST", "/v2/watch", map[string]any{"path": e.dir, "debounce": 50})
	var res WatcherCreatedResult
	if code != 200 || !r.Success || json.Unmarshal(r.Data, &res) != nil || !strings.Contains(r.Message, "Watching only 100 directories") {
		t.Fatalf("create: %d %+v", code, r)
	}
	w := e.plane.e.get(res.WatcherID)
	if n := e.plane.e.ino.count(w); n != 100 {
		t.Fatalf("%d directories watched, want 100", n)
	}
	e.write("top", "")
	e.expect(res.WatcherID, 0, "create top")
	e.mkdir("late") // reported, not watched: the cap holds
	e.expect(res.WatcherID, 1, "create late/")
	if n := e.plane.e.ino.count(w); n != 100 {
		t.Fatalf("%d directories watched after a new one, want 100", n)
	}
	if n := strings.Count(buf.String(), "directory limit reached"); n != 1 {
		t.Fatalf("%d log lines:\n%s", n, buf.String())
	}
	// a reuse says it too; a tree under the cap says nothing
	code, r = e.call("POST", "/v1/file/watch", map[string]any{"path": e.dir, "debounce": 50})
	if code != 200 || !strings.Contains(r.Message, "Watching only 100 directories") {
		t.Fatalf("reuse: %d %+v", code, r)
	}
	small := filepath.Join(e.dir, "d0", "d0")
	if code, r = e.call("POST", "/v2/watch", map[string]any{"path": small}); code != 200 || r.Message != "Operation successful" {
		t.Fatalf("small: %d %+v", code, r)
	}
}

// Many directories under the default cap are all watched, quickly.
func TestManyDirectories(t *testing.T) {
	e := newEnv(t, Config{})
	const dirs = 3000
	mkTree(t, e.dir, dirs, 20)
	start := time.Now()
	id := e.create(nil).WatcherID
	took := time.Since(start)
	if n := e.plane.e.ino.count(e.plane.e.get(id)); n != dirs+1 {
		t.Fatalf("%d directories watched, want %d", n, dirs+1)
	}
	t.Logf("%d directories watched in %v", dirs+1, took)
	deep := filepath.Join(e.dir, "d19", "d19", "f")
	e.fs(os.WriteFile(deep, nil, 0o644))
	e.expect(id, 0, "create d19/d19/f")
}

// Watching a path under /proc or /sys watches that directory alone;
// watching / does not descend into /proc, /sys or other pseudo mounts.
func TestPseudoFilesystems(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc")
	}
	e := newEnv(t, Config{MaxWatchDirs: 5000})
	for _, p := range []string{"/proc", "/proc/self", "/sys"} {
		start := time.Now()
		var res WatcherCreatedResult
		e.OK("POST", "/v2/watch", map[string]any{"path": p}, &res)
		if n := e.plane.e.ino.count(e.plane.e.get(res.WatcherID)); n != 1 || time.Since(start) > 5*time.Second {
			t.Fatalf("%s: %d directories watched in %v", p, n, time.Since(start))
		}
	}
	// "/" without the big real trees, so the walk gets to the pseudo ones
	skip := []string{"usr", "root", "home", "tmp", "var", "work", "opt", "nix", "snap", "lib", "lib64", "lib32", "bin",
		"sbin", "etc", "boot", "srv", "mnt", "media", "run", "farm", "old_root", "go", "data", "workspace"}
	start := time.Now()
	var res WatcherCreatedResult
	e.OK("POST", "/v2/watch", map[string]any{"path": "/", "exclude": skip}, &res)
	paths := e.plane.e.ino.paths(e.plane.e.get(res.WatcherID))
	for _, p := range paths {
		for _, pseudo := range []string{"/proc", "/sys", "/dev/pts", "/dev/mqueue"} {
			if _, in := under(p, pseudo); in {
				t.Fatalf("%s is watched", p)
			}
		}
	}
	if len(paths) >= 1000 {
		t.Fatalf("%d directories watched", len(paths))
	}
	t.Logf("/: %d directories watched in %v", len(paths), time.Since(start))
}

// After lost records the watcher spends one seq per run of losses and
// rescans its tree once per burst, at most once per rescanGap; the rescan
// queues no inotify records itself (it cannot overflow the queue again).
func TestLossRescanCoalesced(t *testing.T) {
	e := newEnv(t, Config{})
	mkTree(t, e.dir, 500, 10)
	id := e.create(nil).WatcherID
	w := e.plane.e.get(id)
	before := e.plane.e.ino.seen()
	lose := func(n int) {
		w.inMu.Lock()
		for range n {
			w.inbox = append(w.inbox, rawEvent{lost: true, at: time.Now()})
		}
		w.inMu.Unlock()
		w.signal()
	}
	deadline := time.Now().Add(10 * time.Second)
	holes := func(want uint64) {
		t.Helper()
		for e.poll(id, 0, 0).Cursor < want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	lose(50)
	holes(1)
	lose(50) // within rescanGap: one more hole, the rescan waits
	holes(2)
	if n := w.rescans.Load(); n != 1 {
		t.Fatalf("%d rescans within the gap", n)
	}
	e.until("the rescan after the gap", func() bool { return w.rescans.Load() >= 2 })
	res := e.poll(id, 0, 0)
	if len(res.Events) != 0 || res.Cursor != 2 || !res.Overflow {
		t.Fatalf("history after two bursts: %+v", res)
	}
	if got := e.plane.e.ino.seen() - before; got != 0 {
		t.Fatalf("the rescans queued %d inotify records", got)
	}
	if n := e.plane.e.ino.count(w); n != 501 {
		t.Fatalf("%d directories watched", n)
	}
	// still watching, without another hole; the watcher has handled
	// what came after the losses, and rescanned no third time
	e.write("d0/after", "")
	e.expect(id, 2, "create d0/after")
	if n := w.rescans.Load(); n != 2 {
		t.Fatalf("%d rescans after the gap", n)
	}
}
