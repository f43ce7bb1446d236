package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxInbox bounds the raw records a watcher holds before its goroutine
// takes them; past it they are dropped and counted as lost.
const maxInbox = 1 << 20

// rescanGap is the least time between two rescans after lost events: a
// burst of overflows costs one walk of the tree, and one more at most
// rescanGap later.
const rescanGap = time.Second

// rawEvent is one inotify record as a watcher receives it.
type rawEvent struct {
	path   string
	mask   uint32
	cookie uint32
	at     time.Time
	self   bool // about a watched directory itself
	lost   bool // records were lost before this point
}

// pending is an event waiting out the debounce window.
type pending struct {
	typ     string
	path    string
	oldPath string
	isDir   bool
	at, due time.Time
	cookie  uint32 // a move-out waiting for its move-in
	hidden  bool   // kept for its side effects, not reported
	lost    bool
}

// spec is a validated watcher configuration.
type spec struct {
	root      string // the watched directory (a file watch: its parent)
	file      string // a file watch: the one name reported
	recursive bool
	debounce  time.Duration
	exclude   *globs
	include   *globs
	key       string // identical keys share a watcher
}

// watcher is one running watch: its goroutine (run) turns inbox records
// into debounced events and publishes them to hist.
type watcher struct {
	spec
	e       *Engine
	ino     *notifier
	id      string
	created time.Time

	inMu   sync.Mutex
	inbox  []rawEvent
	spare  []rawEvent
	dead   atomic.Bool
	sig    chan struct{}
	stop   chan struct{}
	exited chan struct{}

	// set by start before run begins.
	onPseudo bool // the root is on a pseudo filesystem: nothing below it is watched

	// why the tree is not watched whole; each is logged once.
	limited   atomic.Bool // Config.MaxWatchDirs reached
	exhausted atomic.Bool // fs.inotify.max_user_watches reached
	rescans   atomic.Int64

	// run's own state.
	queue      []*pending
	last       map[string]*pending // the latest pending event per path
	froms      map[uint32]*pending // unpaired move-outs by cookie
	rescanAt   time.Time           // a rescan is due (zero: none)
	lastRescan time.Time

	mu      sync.Mutex
	subs    int
	stopped bool
	hist    history
	changed chan struct{} // closed (and replaced) when hist grows; closed for good on stop
}

func newWatcher(e *Engine, ino *notifier, s spec, id string) *watcher {
	return &watcher{spec: s, e: e, ino: ino, id: id, created: time.Now(), subs: 1,
		sig: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{}),
		last: map[string]*pending{}, froms: map[uint32]*pending{},
		hist: history{max: e.cfg.Retention}, changed: make(chan struct{})}
}

// push appends a record to the inbox (the notifier's goroutine calls it).
func (w *watcher) push(r rawEvent) {
	if w.dead.Load() {
		return
	}
	w.inMu.Lock()
	if len(w.inbox) < maxInbox {
		w.inbox = append(w.inbox, r)
	} else if !w.inbox[len(w.inbox)-1].lost {
		w.inbox = append(w.inbox, rawEvent{lost: true, at: r.at})
	}
	w.inMu.Unlock()
}

// signal wakes run after pushes.
func (w *watcher) signal() {
	select {
	case w.sig <- struct{}{}:
	default:
	}
}

// start watches the tree and starts run. On error nothing is left
// running. A root on a pseudo filesystem (/proc, /sys, …) is watched
// itself, nothing below it.
func (w *watcher) start() error {
	err := w.e.inView(func() error {
		if err := w.ino.add(w, w.root); err != nil {
			return err
		}
		if w.recursive {
			w.e.mounts.refresh()
			w.onPseudo = w.e.mounts.pseudoPath(w.root)
		}
		w.addTree(w.root, false, time.Now())
		return nil
	})
	if err != nil {
		w.ino.drop(w, nil)
		close(w.exited)
		return err
	}
	if w.onPseudo {
		w.e.log.Info("watch: the path is on a pseudo filesystem; its subdirectories are not watched",
			"watcher_id", w.id, "path", w.root)
	}
	go w.run()
	return nil
}

// maxDirs is how many directories the watcher may hold.
func (w *watcher) maxDirs() int { return w.e.cfg.MaxWatchDirs }

// warning says why the tree is not watched whole ("" when it is).
func (w *watcher) warning() string {
	switch {
	case w.limited.Load():
		return fmt.Sprintf("Watching only %d directories (the per-watcher limit): deeper directories are not watched; "+
			"watch a narrower path or exclude large subtrees", w.maxDirs())
	case w.exhausted.Load():
		return "Some directories are not watched: the system's inotify watches are used up (fs.inotify.max_user_watches)"
	}
	return ""
}

// halt stops the watcher: pollers and streams see it stopped at once;
// run exits and releases its directories.
func (w *watcher) halt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.stopped = true
	w.dead.Store(true)
	close(w.changed)
	close(w.stop)
}

func (w *watcher) run() {
	defer close(w.exited)
	defer w.ino.drop(w, nil)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var due <-chan time.Time
		if len(w.queue) > 0 {
			timer.Reset(time.Until(w.queue[0].due))
			due = timer.C
		}
		if !w.rescanAt.IsZero() && (due == nil || w.rescanAt.Before(w.queue[0].due)) {
			timer.Reset(time.Until(w.rescanAt))
			due = timer.C
		}
		select {
		case <-w.stop:
			return
		case <-w.sig:
			w.inMu.Lock()
			batch := w.inbox
			w.inbox, w.spare = w.spare[:0], nil
			w.inMu.Unlock()
			for i := range batch {
				w.translate(batch[i])
				batch[i] = rawEvent{}
			}
			w.spare = batch
		case <-due:
		}
		now := time.Now()
		if !w.rescanAt.IsZero() && !now.Before(w.rescanAt) {
			w.rescan(now)
		}
		w.flush(now)
	}
}

// lostAt notes records lost: one hole for a run of losses, and a rescan
// of the tree for directories made meanwhile, at most one per rescanGap.
// The rescan only re-adds watches and reads directories, which queue no
// inotify records, so it cannot overflow the queue in turn.
func (w *watcher) lostAt(at time.Time) {
	if n := len(w.queue); n == 0 || !w.queue[n-1].lost {
		w.enqueue(&pending{lost: true, at: at})
	}
	if w.rescanAt.IsZero() {
		w.rescanAt = time.Now()
		if next := w.lastRescan.Add(rescanGap); next.After(w.rescanAt) {
			w.rescanAt = next
		}
	}
}

func (w *watcher) rescan(now time.Time) {
	w.rescanAt, w.lastRescan = time.Time{}, now
	w.rescans.Add(1)
	w.addTreeInView(w.root, false, now)
}

// rel is path relative to the watch ("." for the root; the name for a
// file watch), and false when path is not reported by this watch.
func (w *watcher) rel(path string) (string, bool) {
	if w.file != "" {
		return w.file, path == joinPath(w.root, w.file)
	}
	rest, ok := under(path, w.root)
	switch {
	case !ok:
		return "", false
	case rest == "":
		return ".", true
	}
	return rest[1:], true
}

// translate turns one record into pending events and keeps the watched
// tree current.
func (w *watcher) translate(r rawEvent) {
	if r.lost {
		w.lostAt(r.at)
		return
	}
	if r.self {
		if w.file == "" && r.path == w.root && r.mask&(inDeleteSelf|inMoveSelf) != 0 {
			w.enqueue(&pending{typ: TypeRemove, path: w.root, isDir: true, at: r.at})
		}
		return
	}
	rel, ok := w.rel(r.path)
	if !ok || w.exclude.anyPart(rel) {
		return
	}
	p := &pending{path: r.path, isDir: r.mask&inIsDir != 0, at: r.at,
		hidden: !w.include.empty() && !w.include.leaf(rel)}
	switch m := r.mask; {
	case m&inCreate != 0:
		p.typ = TypeCreate
		w.enqueue(p)
		if p.isDir {
			w.addTreeInView(r.path, true, r.at)
		}
	case m&inMovedTo != 0:
		if from := w.froms[r.cookie]; from != nil && r.cookie != 0 {
			w.pair(from, p)
		} else {
			p.typ = TypeCreate
			w.enqueue(p)
		}
		if p.isDir {
			w.addTreeInView(r.path, false, r.at)
		}
	case m&inMovedFrom != 0:
		p.typ, p.cookie = TypeRemove, r.cookie
		if r.cookie != 0 {
			w.froms[r.cookie] = p
		}
		w.enqueue(p)
	case m&inDelete != 0:
		p.typ = TypeRemove
		w.enqueue(p)
	case m&inModify != 0:
		p.typ = TypeWrite
		w.enqueue(p)
	case m&inAttrib != 0:
		p.typ = TypeChmod
		w.enqueue(p)
	}
}

// pair completes a move inside the watch: the move-out's event becomes
// a rename (or a create when only the new name is reported).
func (w *watcher) pair(from, to *pending) {
	delete(w.froms, from.cookie)
	from.cookie = 0
	switch {
	case to.hidden:
		return // the old name's remove stands
	case from.hidden:
		from.typ, from.path, from.hidden = TypeCreate, to.path, false
	default:
		from.typ, from.oldPath, from.path = TypeRename, from.path, to.path
	}
	from.isDir = to.isDir
	w.last[to.path] = from
}

// enqueue adds p to the debounce queue, unless it repeats the pending
// write, chmod or create of the same path.
func (w *watcher) enqueue(p *pending) {
	if p.typ == TypeWrite || p.typ == TypeChmod || p.typ == TypeCreate {
		if l := w.last[p.path]; l != nil && l.typ == p.typ && l.cookie == 0 && l.hidden == p.hidden {
			return
		}
	}
	p.due = p.at.Add(w.debounce)
	w.queue = append(w.queue, p)
	if p.path != "" {
		w.last[p.path] = p
	}
}

// flushSlack lets a flush take the events due just after it: the write
// that follows a create by microseconds goes out with it.
const flushSlack = 10 * time.Millisecond

// flush publishes the events whose window has passed, in order.
func (w *watcher) flush(now time.Time) {
	n := 0
	for n < len(w.queue) && !w.queue[n].due.After(now.Add(flushSlack)) {
		n++
	}
	if n == 0 {
		return
	}
	out := make([]FileWatchEvent, 0, n)
	for i, p := range w.queue[:n] {
		w.queue[i] = nil
		for _, k := range []string{p.path, p.oldPath} {
			if w.last[k] == p {
				delete(w.last, k)
			}
		}
		if p.cookie != 0 { // moved out of the watch
			delete(w.froms, p.cookie)
			if p.isDir {
				w.prune(p.path)
			}
		}
		if p.lost {
			out = append(out, FileWatchEvent{})
		} else if !p.hidden {
			out = append(out, w.event(p))
		}
	}
	w.queue = append(w.queue[:0], w.queue[n:]...)
	if len(out) == 0 {
		return
	}
	w.attrs(out)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range out {
		if e.Type == "" {
			w.hist.lose()
		} else {
			w.hist.add(e)
		}
	}
	if !w.stopped {
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// event is p as published, without the path's attributes (see attrs).
func (w *watcher) event(p *pending) FileWatchEvent {
	e := FileWatchEvent{Type: p.typ, Path: p.path, IsDir: p.isDir, Timestamp: unixSeconds(p.at)}
	if rel, ok := w.rel(p.path); ok {
		e.RelativePath = &rel
	}
	if p.oldPath != "" {
		old := p.oldPath
		e.OldPath = &old
	}
	return e
}

// attrs gives the events about to be published (but removes and lost
// records) their paths' attributes as they are now, all read in one
// visit to the engine's view.
func (w *watcher) attrs(evs []FileWatchEvent) {
	_ = w.e.inView(func() error {
		for i := range evs {
			e := &evs[i]
			if e.Type == "" || e.Type == TypeRemove {
				continue
			}
			if fi, err := os.Lstat(e.Path); err == nil {
				mtime, size := unixSeconds(fi.ModTime()), uint64(max(fi.Size(), 0))
				e.Mtime, e.Size = &mtime, &size
				e.Inode = inodeOf(fi)
			}
		}
		return nil
	})
}

// addTreeInView is addTree in the engine's view (a walk bounded by the
// tree and [Config.MaxWatchDirs]).
func (w *watcher) addTreeInView(dir string, scan bool, at time.Time) {
	if !w.recursive || w.onPseudo {
		return
	}
	_ = w.e.inView(func() error { w.addTree(dir, scan, at); return nil })
}

// addTree watches dir and the directories below it (a recursive watch
// only, dir itself excepted when it is the root of a flat watch), in the
// engine's view: call it there (addTreeInView); with
// scan, every entry found below dir is reported as created. It does not
// descend into pseudo filesystems, nor past [Config.MaxWatchDirs]
// directories. The notifier's lock is taken per directory, never across
// the walk, so other watchers' records flow meanwhile.
func (w *watcher) addTree(dir string, scan bool, at time.Time) {
	if !w.recursive || w.onPseudo {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable: skip it
		}
		rel, ok := w.rel(p)
		if !ok || (p != dir && w.exclude.anyPart(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if w.e.mounts.pseudoEntry(d) {
				w.e.log.Debug("watch: not descending into a pseudo filesystem", "watcher_id", w.id, "path", p)
				return filepath.SkipDir
			}
			switch err := w.ino.add(w, p); {
			case err == nil:
			case errors.Is(err, errClosed):
				return filepath.SkipAll
			case errors.Is(err, errDirLimit):
				if w.limited.CompareAndSwap(false, true) {
					w.e.log.Warn("watch: directory limit reached; deeper directories are not watched",
						"watcher_id", w.id, "path", w.root, "limit", w.maxDirs(), "first_unwatched", p)
				}
				return filepath.SkipDir
			case errors.Is(err, errNoWatches):
				if w.exhausted.CompareAndSwap(false, true) {
					w.e.log.Error("watch: inotify watches used up; directories are not watched",
						"watcher_id", w.id, "path", w.root, "first_unwatched", p,
						"hint", "raise fs.inotify.max_user_watches or watch a narrower path")
				}
				return filepath.SkipDir
			default:
				w.e.log.Warn("watch: cannot watch a directory", "watcher_id", w.id, "path", p, "error", err.Error())
				return filepath.SkipDir
			}
		}
		if scan && p != dir && (w.include.empty() || w.include.leaf(rel)) {
			w.enqueue(&pending{typ: TypeCreate, path: p, isDir: d.IsDir(), at: at})
		}
		return nil
	})
}

// prune forgets the directories a move took out of the watch (a new
// directory made at the old path meanwhile is watched again).
func (w *watcher) prune(old string) {
	w.ino.drop(w, func(d string) bool {
		_, moved := under(d, old)
		_, inside := under(d, w.root)
		return moved || !inside
	})
	_ = w.e.inView(func() error {
		if fi, err := os.Lstat(old); err == nil && fi.IsDir() {
			w.addTree(old, false, time.Now())
		}
		return nil
	})
}

// info is the watcher's list entry.
func (w *watcher) info() WatcherInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WatcherInfo{WatcherID: w.id, Path: w.path(), Recursive: w.recursive, Status: StatusActive,
		SubscriberCount: w.subs, EventCount: w.hist.len(), LatestSeq: w.hist.latest, CreatedAt: unixSeconds(w.created)}
}

// clamp is cursor, or the latest seq when cursor is past it: a poll or
// stream clamps its cursor once, before it waits, so a client's stale
// high cursor catches the events that come next.
func (w *watcher) clamp(cursor uint64) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return min(cursor, w.hist.latest)
}

// since reads the history under the lock, with the channel that closes
// when it grows and whether the watcher has stopped.
func (w *watcher) since(cursor uint64, limit int) (evs []FileWatchEvent, next uint64, overflow bool, changed <-chan struct{}, stopped bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	evs, next, overflow = w.hist.since(cursor, limit)
	return evs, next, overflow, w.changed, w.stopped
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// under reports whether p is dir or below it, and the rest of p after
// dir ("" or "/…").
func under(p, dir string) (string, bool) {
	switch {
	case p == dir:
		return "", true
	case dir == "/":
		return p, strings.HasPrefix(p, "/")
	case strings.HasPrefix(p, dir) && len(p) > len(dir) && p[len(dir)] == '/':
		return p[len(dir):], true
	}
	return "", false
}

func joinPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// LastUsed is when the watcher was created (sessions.Session).
func (w *watcher) LastUsed() time.Time { return w.created }

// Expire never ends a watcher (sessions.Session): it lives until its
// last subscriber stops it or the engine closes.
func (w *watcher) Expire(time.Duration) bool { return false }
