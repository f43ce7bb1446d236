package watch

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The published example: echo 'X = 1' > util.py is a create then a write.
func TestDocumentedExample(t *testing.T) {
	e := newEnv(t, Config{})
	w := e.create(map[string]any{"debounce": 200})
	if w.Status != StatusActive || w.Reused || w.InitialCursor != 0 || w.Path != e.dir || w.CreatedAt == 0 {
		t.Fatalf("created %+v", w)
	}
	e.write("util.py", "X = 1\n")
	res := e.poll(w.WatcherID, 0, 10)
	var got []string
	for _, ev := range res.Events {
		got = append(got, fmt.Sprint(ev.Seq, " ", ev.Type, " ", *ev.RelativePath))
	}
	if strings.Join(got, "|") != "1 create util.py|2 write util.py" || res.Cursor != 2 || res.Overflow {
		t.Fatalf("poll %v cursor %d overflow %v", got, res.Cursor, res.Overflow)
	}
	ev := res.Events[1]
	fi, _ := os.Stat(e.path("util.py"))
	if ev.Path != e.path("util.py") || ev.IsDir || ev.Size == nil || *ev.Size != 6 || ev.Inode == nil || ev.Mtime == nil ||
		ev.OldPath != nil || ev.Timestamp < float64(time.Now().Add(-time.Minute).Unix()) || *ev.Inode != inode(t, fi) {
		t.Fatalf("event %+v", ev)
	}
}

func inode(t *testing.T, fi os.FileInfo) uint64 {
	t.Helper()
	if p := inodeOf(fi); p != nil {
		return *p
	}
	return 0
}

// Files and directories: create, modify, rename, delete, each once and in
// order, including paths under a renamed directory.
func TestLifecycle(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.create(nil).WatcherID
	e.write("a.txt", "1")
	c := e.expect(id, 0, "create a.txt", "write a.txt")
	e.mv(e.path("a.txt"), e.path("b.txt"))
	c = e.expect(id, c, "rename "+e.path("a.txt")+" -> b.txt")
	e.mkdir("d")
	c = e.expect(id, c, "create d/")
	e.write("d/x", "x")
	c = e.expect(id, c, "create d/x", "write d/x")
	e.fs(os.Chmod(e.path("d/x"), 0o600))
	c = e.expect(id, c, "chmod d/x")
	e.mv(e.path("d"), e.path("e"))
	c = e.expect(id, c, "rename "+e.path("d")+" -> e/")
	e.write("e/x", "yy")
	c = e.expect(id, c, "write e/x")
	e.fs(os.Remove(e.path("b.txt")))
	c = e.expect(id, c, "remove b.txt")
	e.fs(os.RemoveAll(e.path("e")))
	c = e.expect(id, c, "remove e/x", "remove e/")
	// a move out of the tree is a remove, a move in a create
	out := t.TempDir()
	e.write("m", "m")
	c = e.expect(id, c, "create m", "write m")
	e.mv(e.path("m"), filepath.Join(out, "m"))
	c = e.expect(id, c, "remove m")
	e.mv(filepath.Join(out, "m"), e.path("n"))
	e.expect(id, c, "create n")
}

// A new directory is watched at once, and what was made in it before the
// watch took hold is reported once.
func TestNewSubdirectory(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.create(nil).WatcherID
	e.mkdir("a/b/c")
	e.fs(os.WriteFile(e.path("a/b/c/f"), nil, 0o644))
	c := e.expect(id, 0, "create a/", "create a/b/", "create a/b/c/", "create a/b/c/f")
	e.write("a/b/c/g", "")
	e.expect(id, c, "create a/b/c/g")
}

// A flat watch reports its directory's entries, not deeper ones.
func TestNotRecursive(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkdir("sub")
	id := e.create(map[string]any{"recursive": false}).WatcherID
	e.write("sub/deep", "")
	e.write("top", "")
	e.expect(id, 0, "create top")
}

func TestExcludeDefaultsAndReplacement(t *testing.T) {
	e := newEnv(t, Config{})
	for _, d := range []string{".git", "node_modules"} {
		e.mkdir(d)
	}
	def := e.create(nil).WatcherID
	own := e.create(map[string]any{"exclude": []string{"*.log"}}).WatcherID
	e.write(".git/HEAD", "")
	e.write("node_modules/x.js", "")
	e.write("a.pyc", "")
	e.write("a.swp", "")
	e.write("a~", "")
	e.write("x.log", "x")
	e.write("keep", "")
	e.expect(def, 0, "create x.log", "write x.log", "create keep")
	e.expect(own, 0, "create .git/HEAD", "create node_modules/x.js", "create a.pyc", "create a.swp", "create a~", "create keep")
}

func TestIncludePatterns(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.create(map[string]any{"include_patterns": []string{"*.py", "docs/**/*.md"}}).WatcherID
	e.mkdir("docs/x")
	w := e.plane.e.get(id)
	e.until("docs/x to be watched", func() bool { return e.plane.e.ino.count(w) == 3 })
	e.write("a.py", "")
	e.write("b.txt", "")
	e.write("docs/x/r.md", "")
	e.write("r.md", "")
	e.expect(id, 0, "create a.py", "create docs/x/r.md")
}

// Writes within the window are one write; a create or remove is never
// folded away.
func TestDebounceCoalesces(t *testing.T) {
	e := newEnv(t, Config{})
	e.write("f", "")
	id := e.create(map[string]any{"debounce": 500}).WatcherID
	for i := range 5 {
		f, err := os.OpenFile(e.path("f"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(f, i)
		f.Close()
	}
	e.fs(os.Remove(e.path("f")))
	e.write("f", "again")
	e.expect(id, 0, "write f", "remove f", "create f", "write f")
}

func TestWatchSingleFile(t *testing.T) {
	e := newEnv(t, Config{})
	e.write("one", "")
	w := e.create(map[string]any{"path": "one"}) // relative to the workspace
	if w.Path != e.path("one") {
		t.Fatalf("path %q", w.Path)
	}
	e.write("two", "")
	e.write("one", "1")
	e.expect(w.WatcherID, 0, "write one")
}

func TestReuseAndSubscribers(t *testing.T) {
	e := newEnv(t, Config{})
	a := e.create(nil)
	e.write("f", "")
	e.expect(a.WatcherID, 0, "create f")
	b := e.create(nil)
	if !b.Reused || b.WatcherID != a.WatcherID || b.InitialCursor != 1 {
		t.Fatalf("reuse %+v", b)
	}
	if c := e.create(map[string]any{"debounce": 60}); c.Reused {
		t.Fatal("a different debounce reused")
	}
	var list []WatcherInfo
	e.OK("GET", "/v2/watch", nil, &list)
	if len(list) != 2 || list[0].WatcherID != a.WatcherID || list[0].SubscriberCount != 2 || list[0].LatestSeq != 1 ||
		list[0].EventCount != 1 || !list[0].Recursive || list[0].Status != StatusActive || list[0].Path != e.dir {
		t.Fatalf("list %+v", list)
	}
	var st WatcherStoppedResult
	e.OK("DELETE", "/v2/watch/"+a.WatcherID, nil, &st)
	if st.Status != StatusReleased {
		t.Fatalf("first delete %+v", st)
	}
	e.OK("DELETE", "/v1/file/watch/"+a.WatcherID, nil, &st)
	if st.Status != StatusStopped || st.WatcherID != a.WatcherID {
		t.Fatalf("second delete %+v", st)
	}
	if code, _ := e.call("DELETE", "/v2/watch/"+a.WatcherID, nil); code != http.StatusNotFound {
		t.Fatalf("third delete %d", code)
	}
	e.OK("GET", "/v1/file/watch", nil, &list)
	if len(list) != 1 {
		t.Fatalf("list after delete %+v", list)
	}
}

func TestWatcherCap(t *testing.T) {
	e := newEnv(t, Config{})
	for i := range DefaultMaxWatchers {
		e.create(map[string]any{"debounce": 50 + i})
	}
	code, r := e.call("POST", "/v2/watch", map[string]any{"path": e.dir, "debounce": 1000})
	if code != http.StatusTooManyRequests || r.Success || r.Hint == nil {
		t.Fatalf("129th: %d %+v", code, r)
	}
	// an identical config still shares
	e.create(map[string]any{"debounce": 50})
}

func TestValidation(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.create(nil).WatcherID
	for _, c := range []struct {
		method, path string
		body         any
		code         int
		msg          string
	}{
		{"POST", "/v2/watch", map[string]any{"path": e.dir, "debounce": 49}, 400, "debounce must be between 50 and 5000 ms"},
		{"POST", "/v2/watch", map[string]any{"path": e.dir, "debounce": 5001}, 400, "debounce must be between 50 and 5000 ms"},
		{"POST", "/v2/watch", map[string]any{"path": e.dir, "exclude": []string{"[x"}}, 400, `invalid glob "[x" in exclude`},
		{"POST", "/v2/watch", map[string]any{}, 422, "Request data validation failed"},
		{"POST", "/v2/watch", map[string]any{"path": e.dir, "debounce": -1}, 422, "Request data validation failed"},
		{"POST", "/v2/watch", map[string]any{"path": e.path("missing")}, 404, "Failed to watch: No such file or directory (os error 2)"},
		{"POST", "/v1/file/watch", map[string]any{"path": e.path("missing")}, 200, "Failed to watch: No such file or directory (os error 2)"},
		{"GET", "/v2/watch/" + id + "/poll?limit=0", nil, 400, "limit must be between 1 and 1000"},
		{"GET", "/v2/watch/" + id + "/poll?limit=1001", nil, 400, "limit must be between 1 and 1000"},
		{"GET", "/v2/watch/" + id + "/poll?cursor=x", nil, 422, "Request data validation failed"},
		{"POST", "/v1/file/watch/" + id + "/poll", map[string]any{"limit": 0}, 400, "limit must be between 1 and 1000"},
		{"GET", "/v2/watch/nope/poll", nil, 404, "Watcher not found: nope"},
		{"POST", "/v1/file/watch/nope/poll", map[string]any{}, 404, "Watcher not found: nope"},
		{"DELETE", "/v2/watch/nope", nil, 404, "Watcher not found: nope"},
		{"POST", "/v1/file/watch/wait", map[string]any{"path": e.dir, "event_types": []string{"open"}}, 422, "Request data validation failed"},
	} {
		code, r := e.call(c.method, c.path, c.body)
		if code != c.code || r.Success || r.Message != c.msg {
			t.Errorf("%s %s %v: %d %q, want %d %q", c.method, c.path, c.body, code, r.Message, c.code, c.msg)
		}
	}
}

// An unknown watcher's stream is a 404 envelope, never a stream.
func TestStreamUnknownWatcher(t *testing.T) {
	e := newEnv(t, Config{})
	for _, p := range []string{"/v2/watch/nope/events", "/v1/file/watch/nope/events"} {
		s := e.stream(p, nil)
		if s.resp.StatusCode != http.StatusNotFound || strings.Contains(s.resp.Header.Get("Content-Type"), "event-stream") {
			t.Fatalf("%s: %d %s", p, s.resp.StatusCode, s.resp.Header.Get("Content-Type"))
		}
		var r struct{ Success bool }
		if err := json.NewDecoder(s.rd).Decode(&r); err != nil || r.Success {
			t.Fatalf("%s: body %v", p, err)
		}
	}
}

func TestStream(t *testing.T) {
	e := newEnv(t, Config{KeepAlive: 100 * time.Millisecond})
	id := e.create(nil).WatcherID
	s := e.stream("/v2/watch/"+id+"/events", nil)
	if ct := s.resp.Header.Get("Content-Type"); s.resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("%d %s", s.resp.StatusCode, ct)
	}
	if f := s.must(t); f.event != "watch_started" || !strings.Contains(f.data, `"watcher_id":"`+id+`"`) {
		t.Fatalf("first frame %+v", f)
	}
	e.write("a", "1")
	s.change(t, id+":1", "create a")
	s.change(t, id+":2", "write a")
	e.mv(e.path("a"), e.path("b"))
	s.change(t, id+":3", "rename "+e.path("a")+" -> b")
	s.keepAlive(t) // a comment between frames, which must skips

	// resume after seq 1 on the v1 route: 2 and 3 are replayed
	r := e.stream("/v1/file/watch/"+id+"/events", map[string]string{"Last-Event-ID": id + ":1"})
	r.must(t)
	r.change(t, id+":2", "")
	r.change(t, id+":3", "")

	// deleting the watcher ends both streams with watch_stopped
	e.OK("DELETE", "/v2/watch/"+id, nil, nil)
	for _, st := range []*sse{s, r} {
		if f := st.must(t); f.event != "watch_stopped" {
			t.Fatalf("final frame %+v", f)
		}
		st.end(t)
	}
}

func TestKeepAlive(t *testing.T) {
	e := newEnv(t, Config{KeepAlive: 50 * time.Millisecond})
	id := e.create(nil).WatcherID
	s := e.stream("/v2/watch/"+id+"/events?cursor=0", nil)
	s.must(t)
	l, err := s.rd.ReadString('\n')
	if err != nil || l != ": keep-alive\n" {
		t.Fatalf("%q %v", l, err)
	}
}

func TestCloseEndsStreams(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.create(nil).WatcherID
	s := e.stream("/v2/watch/"+id+"/events", nil)
	s.must(t)
	done := make(chan int, 1)
	go func() {
		code, _ := e.call("GET", fmt.Sprintf("/v2/watch/%s/poll?timeout=30", id), nil)
		done <- code
	}()
	e.waiting(1) // the long poll
	if err := e.plane.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f := s.must(t); f.event != "watch_stopped" {
		t.Fatalf("frame %+v", f)
	}
	s.end(t)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("long poll outlived Close")
	}
	if code, _ := e.call("POST", "/v2/watch", map[string]any{"path": e.dir}); code != http.StatusServiceUnavailable {
		t.Fatalf("create after close: %d", code)
	}
}

// A small retention: a cursor older than what is kept is told overflow.
func TestRetentionOverflow(t *testing.T) {
	e := newEnv(t, Config{Retention: 5})
	id := e.create(nil).WatcherID
	for i := range 10 {
		e.write(fmt.Sprint("f", i), "x")
	}
	deadline := time.Now().Add(10 * time.Second)
	var res PollWatchResult
	for time.Now().Before(deadline) {
		if res = e.poll(id, 0, 1); res.Cursor == 20 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !res.Overflow || len(res.Events) != 5 || res.Events[0].Seq != 16 || res.Cursor != 20 {
		t.Fatalf("poll: overflow %v, %d events, cursor %d", res.Overflow, len(res.Events), res.Cursor)
	}
	if res := e.poll(id, 17, 0); res.Overflow || len(res.Events) != 3 {
		t.Fatalf("kept cursor: %+v", res)
	}
	// paging with a limit
	var page PollWatchResult
	e.OK("POST", "/v1/file/watch/"+id+"/poll", map[string]any{"cursor": 15, "limit": 2}, &page)
	if page.Overflow || len(page.Events) != 2 || page.Cursor != 17 {
		t.Fatalf("v1 page %+v", page)
	}
}

func TestHistoryHoles(t *testing.T) {
	h := history{max: 3}
	h.add(FileWatchEvent{Type: TypeCreate})
	h.lose()
	h.add(FileWatchEvent{Type: TypeWrite})
	if evs, next, ov := h.since(0, 10); len(evs) != 2 || next != 3 || !ov {
		t.Fatalf("across the hole: %d %d %v", len(evs), next, ov)
	}
	if evs, next, ov := h.since(2, 10); len(evs) != 1 || next != 3 || ov {
		t.Fatalf("after the hole: %d %d %v", len(evs), next, ov)
	}
	if _, next, ov := h.since(1, 0); next != 3 || !ov {
		t.Fatalf("limit 0 counts as 1: %d %v", next, ov)
	}
	if evs, next, ov := h.since(99, 10); len(evs) != 0 || next != 3 || ov {
		t.Fatalf("future cursor: %d %d %v", len(evs), next, ov)
	}
	for range 3 {
		h.add(FileWatchEvent{Type: TypeChmod})
	}
	if evs, _, ov := h.since(3, 10); len(evs) != 3 || ov || len(h.holes) != 0 {
		t.Fatalf("after trim: %d %v %v", len(evs), ov, h.holes)
	}
}

func TestWaitV1(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkdir("dir")
	go func() {
		e.waitingFor(1) // the wait's watcher watches
		e.write("dir/other", "")
		e.write("dir/target", "x")
	}()
	var res WaitWatchResult
	e.OK("POST", "/v1/file/watch/wait", map[string]any{"path": e.path("dir/target"), "timeout": 10, "event_types": []string{"write"}}, &res)
	if res.Event.Type != TypeWrite || res.Event.Path != e.path("dir/target") {
		t.Fatalf("event %+v", res.Event)
	}
	// a directory: any entry
	go func() {
		e.waitingFor(1)
		e.write("dir/third", "")
	}()
	e.OK("POST", "/v1/file/watch/wait", map[string]any{"path": "dir"}, &res)
	if res.Event.Type != TypeCreate || *res.Event.RelativePath != "third" {
		t.Fatalf("dir event %+v", res.Event)
	}
	start := time.Now()
	code, r := e.call("POST", "/v1/file/watch/wait", map[string]any{"path": e.path("dir/never"), "timeout": 1})
	if code != http.StatusServiceUnavailable || r.Message != "timed out waiting for file event" || time.Since(start) < time.Second {
		t.Fatalf("timeout: %d %q", code, r.Message)
	}
	var list []WatcherInfo
	if e.OK("GET", "/v2/watch", nil, &list); len(list) != 0 {
		t.Fatalf("a wait's watcher is listed: %+v", list)
	}
	if code, r := e.call("POST", "/v1/file/watch/wait", map[string]any{"path": e.path("no/such/file")}); code != 200 || r.Success {
		t.Fatalf("missing parent: %d %+v", code, r)
	}
}

func TestParseEventID(t *testing.T) {
	for _, c := range []struct {
		in   string
		seq  uint64
		okay bool
	}{{"w:5", 5, true}, {"7", 7, true}, {" w:0 ", 0, true}, {"x:5", 0, false}, {"w:", 0, false},
		{"w:-1", 0, false}, {"w:+1", 0, false}, {"", 0, false}, {"w:18446744073709551616", 0, false}} {
		if seq, ok := parseEventID(c.in, "w"); seq != c.seq || ok != c.okay {
			t.Errorf("%q: %d %v", c.in, seq, ok)
		}
	}
}

func TestGlobs(t *testing.T) {
	g, err := compileGlobs("exclude", []string{".git", "*.pyc", "build/out", "**/gen/*.go"})
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]bool{".git": true, "a/.git/HEAD": true, "x.pyc": true, "a/b.pyc/c": true,
		"build/out/x": true, "src/build/out": false, "a/gen/x.go": true, "gen/x.go": true, "gen/x.txt": false, "ok.py": false, ".": false} {
		if g.anyPart(rel) != want {
			t.Errorf("anyPart(%q) = %v", rel, !want)
		}
	}
}

// Lost records (as after IN_Q_OVERFLOW) spend a seq: polls and streams
// crossing it are told overflow, later ones are not.
func TestLossReported(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.create(nil).WatcherID
	e.write("a", "")
	c := e.expect(id, 0, "create a")
	w := e.plane.e.get(id)
	w.push(rawEvent{lost: true, at: time.Now()})
	w.signal()
	e.write("b", "")
	var res PollWatchResult
	for deadline := time.Now().Add(10 * time.Second); len(res.Events) == 0 && time.Now().Before(deadline); {
		res = e.poll(id, c, 1)
	}
	if !res.Overflow || len(res.Events) != 1 || res.Events[0].Seq != 3 || res.Cursor != 3 {
		t.Fatalf("across the loss: %+v", res)
	}
	if res := e.poll(id, 3, 0); res.Overflow {
		t.Fatal("overflow after the loss")
	}
	s := e.stream("/v2/watch/"+id+"/events", nil)
	s.must(t)
	s.change(t, id+":1", "create a")
	if f := s.must(t); f.event != "overflow" {
		t.Fatalf("frame %+v", f)
	}
	s.change(t, id+":3", "create b")
}
