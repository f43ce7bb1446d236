//go:build linux

package watch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watchMask is what every watched directory reports.
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// inotify record flags the watchers read.
const (
	inCreate     = unix.IN_CREATE
	inModify     = unix.IN_MODIFY
	inAttrib     = unix.IN_ATTRIB
	inDelete     = unix.IN_DELETE
	inMovedFrom  = unix.IN_MOVED_FROM
	inMovedTo    = unix.IN_MOVED_TO
	inDeleteSelf = unix.IN_DELETE_SELF
	inMoveSelf   = unix.IN_MOVE_SELF
	inIsDir      = unix.IN_ISDIR
)

// notifier is the one inotify instance every watcher of an engine
// shares. Its reader goroutine only parses and hands records to the
// watchers' inboxes, so the kernel queue drains as fast as it fills.
type notifier struct {
	fd   int
	file *os.File
	log  *slog.Logger
	done chan struct{} // closed when the reader returns

	mu     sync.Mutex
	closed bool
	dirs   map[int32]*dirWatch
	byPath map[string]int32
	moves  [32]dirMove // recent directory MOVED_FROMs, by cookie
	nmove  int
	subs   map[*watcher]int // how many directories each watcher holds

	records atomic.Int64 // inotify records read, for tests
}

// dirWatch is one watched directory and the watchers subscribed to it.
type dirWatch struct {
	path string
	subs map[*watcher]struct{}
}

type dirMove struct {
	cookie uint32
	path   string
}

// newNotifier opens an inotify instance and starts its reader; Close
// stops it.
func newNotifier(log *slog.Logger) (*notifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watch: inotify_init1: %w", err)
	}
	n := &notifier{fd: fd, file: os.NewFile(uintptr(fd), "inotify"), log: log, done: make(chan struct{}),
		dirs: map[int32]*dirWatch{}, byPath: map[string]int32{}, subs: map[*watcher]int{}}
	go n.read()
	return n, nil
}

// add watches dir for w. Watching a directory twice (another watcher, or
// the same one again) shares the kernel watch. A watcher holding
// w.maxDirs directories gets errDirLimit for one more; a full
// fs.inotify.max_user_watches errNoWatches.
func (n *notifier) add(w *watcher, dir string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errClosed
	}
	if n.subs[w] >= w.maxDirs() {
		if wd, ok := n.byPath[dir]; !ok || !n.dirs[wd].holds(w) {
			return errDirLimit
		}
	}
	wd, err := unix.InotifyAddWatch(n.fd, dir, watchMask)
	if errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("%w: %s: %w", errNoWatches, dir, err) // the errno stays for a create's answer
	}
	if err != nil {
		return fmt.Errorf("watch: inotify_add_watch %s: %w", dir, err)
	}
	d := n.dirs[int32(wd)]
	if d == nil {
		d = &dirWatch{path: dir, subs: map[*watcher]struct{}{}}
		n.dirs[int32(wd)] = d
	} else if d.path != dir {
		delete(n.byPath, d.path)
		d.path = dir
	}
	n.byPath[dir] = int32(wd)
	if _, ok := d.subs[w]; !ok {
		d.subs[w] = struct{}{}
		n.subs[w]++
	}
	return nil
}

// drop unsubscribes w from the directories drop selects (all of them
// when drop is nil), removing kernel watches nobody holds any more.
func (n *notifier) drop(w *watcher, sel func(dir string) bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for wd, d := range n.dirs {
		if _, ok := d.subs[w]; !ok || (sel != nil && !sel(d.path)) {
			continue
		}
		delete(d.subs, w)
		if n.subs[w]--; n.subs[w] <= 0 {
			delete(n.subs, w)
		}
		if len(d.subs) == 0 && !n.closed {
			_, _ = unix.InotifyRmWatch(n.fd, uint32(wd))
			n.forget(wd, d)
		}
	}
}

// holds reports whether w is subscribed to d (a nil d: no).
func (d *dirWatch) holds(w *watcher) bool {
	if d == nil {
		return false
	}
	_, ok := d.subs[w]
	return ok
}

// seen is how many inotify records the reader has taken.
func (n *notifier) seen() int64 { return n.records.Load() }

// count is how many directories w holds.
func (n *notifier) count(w *watcher) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.subs[w]
}

// paths lists the directories w holds.
func (n *notifier) paths(w *watcher) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, d := range n.dirs {
		if _, ok := d.subs[w]; ok {
			out = append(out, d.path)
		}
	}
	return out
}

func (n *notifier) forget(wd int32, d *dirWatch) {
	delete(n.dirs, wd)
	if n.byPath[d.path] == wd {
		delete(n.byPath, d.path)
	}
}

// Close closes the instance and waits for the reader to return.
func (n *notifier) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.mu.Unlock()
	_ = n.file.Close()
	<-n.done
}

// read drains the instance until it is closed.
func (n *notifier) read() {
	defer close(n.done)
	buf := make([]byte, 512<<10)
	for {
		k, err := n.file.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			n.log.Error("watch: inotify read failed; watching stops", "error", err.Error())
			n.broadcastLoss()
			return
		}
		n.dispatch(buf[:k], time.Now())
	}
}

// broadcastLoss tells every watcher that events were lost.
func (n *notifier) broadcastLoss() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for w := range n.subs {
		w.push(rawEvent{lost: true, at: time.Now()})
		w.signal()
	}
}

// dispatch parses one read's records and appends each to the inbox of
// every watcher subscribed to its directory.
func (n *notifier) dispatch(b []byte, at time.Time) {
	touched := map[*watcher]struct{}{}
	n.mu.Lock()
	for off := 0; off+unix.SizeofInotifyEvent <= len(b); {
		wd := int32(binary.NativeEndian.Uint32(b[off:]))
		mask := binary.NativeEndian.Uint32(b[off+4:])
		cookie := binary.NativeEndian.Uint32(b[off+8:])
		nameLen := int(binary.NativeEndian.Uint32(b[off+12:]))
		start := off + unix.SizeofInotifyEvent
		n.records.Add(1)
		off = min(start+nameLen, len(b))
		name := strings.TrimRight(string(b[start:off]), "\x00")

		if mask&unix.IN_Q_OVERFLOW != 0 {
			n.log.Warn("watch: inotify queue overflowed; events were lost")
			for w := range n.subs {
				w.push(rawEvent{lost: true, at: at})
				touched[w] = struct{}{}
			}
			continue
		}
		d := n.dirs[wd]
		if d == nil {
			continue
		}
		if mask&unix.IN_IGNORED != 0 {
			for w := range d.subs {
				if n.subs[w]--; n.subs[w] <= 0 {
					delete(n.subs, w)
				}
			}
			n.forget(wd, d)
			continue
		}
		ev := rawEvent{path: d.path, mask: mask, cookie: cookie, at: at, self: name == ""}
		if name != "" {
			ev.path = joinPath(d.path, name)
		}
		n.trackMove(ev)
		for w := range d.subs {
			w.push(ev)
			touched[w] = struct{}{}
		}
	}
	n.mu.Unlock()
	for w := range touched {
		w.signal()
	}
}

// trackMove keeps the watched directories' paths right when a directory
// is moved: MOVED_FROM remembers the cookie, the matching MOVED_TO
// renames every watch at or below the old path.
func (n *notifier) trackMove(ev rawEvent) {
	if ev.mask&unix.IN_ISDIR == 0 || ev.cookie == 0 {
		return
	}
	if ev.mask&unix.IN_MOVED_FROM != 0 {
		n.moves[n.nmove%len(n.moves)] = dirMove{ev.cookie, ev.path}
		n.nmove++
		return
	}
	if ev.mask&unix.IN_MOVED_TO == 0 {
		return
	}
	for _, m := range n.moves {
		if m.cookie != ev.cookie || m.path == "" {
			continue
		}
		for wd, d := range n.dirs {
			if rest, ok := under(d.path, m.path); ok {
				delete(n.byPath, d.path)
				d.path = ev.path + rest
				n.byPath[d.path] = wd
			}
		}
		return
	}
}

// inodeOf is fi's inode number.
func inodeOf(fi fs.FileInfo) *uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino := uint64(st.Ino)
		return &ino
	}
	return nil
}
