package pool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod"
	"github.com/a2c-smcp/a2c-go/aiod/internal/egress"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

// box is one sandbox of the pool: its workspace, its sandbox (init,
// namespaces, cgroup) and the daemon whose planes serve it, plus its
// lifecycle (deadline, idle timeout, office seat).
//
// Locking: mu guards the mutable fields below it; the immutable ones
// above are set before the box is shared. A box's transitions (pause,
// resume, close) hold mu for their whole run, so two never interleave;
// nothing called under mu takes the pool's lock.
type box struct {
	p                 *Pool
	id                string
	uid               int // host uid of its account (0: the unprivileged pool's one account)
	template, network string
	limits            Limits
	dir               string // the workspace on the host
	image             string // with Config.Disk, the image file mounted on dir
	created           time.Time
	// egress and rules are a network "egress" box's rules, as the create
	// gave them and as its link reads them.
	egress *Egress
	rules  egress.Rules
	// claimedWarm and officeName are set by admit, under the pool's lock,
	// before the box is handed to the create that claimed it.
	claimedWarm bool
	officeName  string

	// started is closed when begin has run (or the start failed): a
	// request to a box still starting waits for it.
	startedOnce sync.Once
	started     chan struct{}

	// lastActive is when the latest API request, tool call or terminal
	// input arrived (Unix ns): the idle timeout's clock.
	lastActive atomic.Int64

	mu        sync.Mutex
	state     State
	closed    bool
	sb        *sandbox.Sandbox
	d         *aiod.Daemon
	handler   http.Handler
	timeoutS  int       // the lifetime asked for (0: none); a resume re-arms it
	expires   time.Time // zero: no deadline
	onTimeout string
	idle      time.Duration
	office    string // joined office ("" none) and the Computer's name there
	computer  string
	metadata  map[string]string
	// officeStop ends the office connection; officeDone is closed when it
	// has ended.
	officeStop context.CancelFunc
	officeDone chan struct{}
	// disk caches the workspace's size (walking it is not free).
	disk   uint64
	diskAt time.Time
	// link is a network "egress" box's way out, reserved by start and
	// closed by close once the sandbox has ended.
	link *egress.Link
	// parent is the snapshot a whole machine started from ("": none),
	// ancestors that one and the snapshots it descends from, nearest
	// first. Set before the box is shared.
	parent    string
	ancestors []string
	// machine: the box is a whole machine (Config.Machine).
	machine bool
}

// afterStartHook, when a test sets it, runs in start once the daemon is
// built, before the box takes it: where a delete may race the start.
var afterStartHook func(*box)

// warnings passes on a handler's records of level Warn and above: what
// the sandbox package tells at Info of one sandbox's start (its
// idmapped workspace, say) is the same for every sandbox of a pool, and
// would fill its log.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnings) WithAttrs(a []slog.Attr) slog.Handler { return warnings{w.Handler.WithAttrs(a)} }

func (w warnings) WithGroup(name string) slog.Handler { return warnings{w.Handler.WithGroup(name)} }

// start builds the box's workspace, sandbox and daemon. It runs before
// the box is reachable by anyone but its creator.
func (b *box) start() (err error) {
	p := b.p
	if b.machine {
		if err := p.machinesReady(p.ctx); err != nil {
			return err
		}
		// The upper layer: a writable snapshot of the snapshot the box
		// starts from (its workspace with it), or an empty one.
		if b.parent != "" {
			err = snapshotLayer(p.snapshotPath(b.parent), b.upper(), false)
		} else {
			err = createLayer(b.upper(), p.btrfs)
		}
		if err == nil && p.cfg.Disk > 0 {
			err = limitLayer(b.upper(), p.cfg.Disk)
		}
		if err != nil {
			return fmt.Errorf("upper layer: %w", err)
		}
	}
	if err := os.Mkdir(b.dir, 0o700); err != nil && !(b.parent != "" && errors.Is(err, fs.ErrExist)) {
		return fmt.Errorf("workspace: %w", err)
	}
	owner := -1 // an unprivileged pool's files are its own
	switch {
	case b.machine:
		// In the upper layer, stored as the rest of it is: with the ids
		// it has inside shifted by sandbox.LayerIDs (root's), idmapped
		// to the sandbox's range.
		owner = sandbox.LayerIDs
		if err := os.Lchown(b.dir, owner, owner); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
		if err := os.Chmod(b.dir, 0o755); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
	case !p.single:
		owner = p.cfg.UIDBase
		if err := os.Lchown(b.dir, owner, owner); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
	}
	if b.image != "" { // a filesystem of its own, owned as the directory is (close undoes it)
		if err := makeDisk(p.ctx, p.mkfs, b.image, b.dir, p.cfg.Disk, owner); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
	}
	if dir, ok := p.cfg.Templates[b.template]; ok { // a directory template (a snapshot's came with the layer)
		if err := copyTree(dir, b.dir, owner); err != nil {
			return fmt.Errorf("template %s: %w", b.template, err)
		}
	}
	if b.network == NetworkEgress {
		// Reserved under mu: a close that has run finds it and closes
		// it, or this start finds the box closed.
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return errClosed
		}
		b.link, err = p.egress.Reserve(b.rules)
		b.mu.Unlock()
		if err != nil {
			return err // the egress package's errors say "egress: "
		}
	}
	t0 := time.Now()
	sb, err := sandbox.New(b.sandboxConfig(), slog.New(warnings{p.log.Handler()}).With("sandbox", b.id))
	if err != nil {
		return err
	}
	t1 := time.Now()
	dc := p.cfg.Daemon
	dc.Workspace, dc.APIKey, dc.Sandbox, dc.Pooled = b.dir, p.cfg.Token, sb, true
	dc.Isolation, dc.DefaultUser, dc.Browser, dc.Desktop = aiod.Isolation{}, "", false, false
	dc.PathPrefix = "/sandboxes/" + b.id
	dc.Logger = p.log.With("sandbox", b.id)
	dc.Listen, dc.AllowedHosts, dc.AllowedOrigins = p.cfg.Listen, p.cfg.AllowedHosts, p.cfg.AllowedOrigins
	dc.BeforeTool = b.ready
	// A keystroke over a terminal's socket opened before a pause resumes
	// the sandbox too, as a request would.
	dc.OnActivity = func() { _ = b.ready(context.Background()) }
	d, err := aiod.New(dc) // owns sb from here, failed or not
	if err != nil {
		return err
	}
	p.log.Debug("sandbox started", "id", b.id, "sandbox", t1.Sub(t0), "daemon", time.Since(t1))
	if afterStartHook != nil {
		afterStartHook(b)
	}
	b.mu.Lock()
	if b.closed {
		// Deleted while it started: close found no daemon to end, so
		// what was just built ends here (the daemon owns sb), and so
		// does a workspace made after the delete removed it.
		b.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownBound)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			p.log.Warn("sandbox shutdown", "id", b.id, "err", err)
		}
		b.removeWorkspace(false)
		return errClosed
	}
	b.sb, b.d, b.handler, b.state = sb, d, d.Handler(), Running
	b.mu.Unlock()
	b.lastActive.Store(time.Now().UnixNano())
	return nil
}

// begin gives a started box what its create asked for (environment,
// deadline, metadata, office) and opens it to requests.
func (b *box) begin(s spec) error {
	defer b.startedOnce.Do(func() { close(b.started) })
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errClosed
	}
	b.sb.SetEnv(s.env)
	b.timeoutS, b.onTimeout, b.idle, b.metadata = int(s.timeout/time.Second), s.onTimeout, s.idle, s.metadata
	if s.timeout > 0 {
		b.expires = time.Now().Add(s.timeout)
	}
	b.lastActive.Store(time.Now().UnixNano())
	var joined chan struct{}
	if s.office != "" {
		joined = b.joinOffice(s.office, s.name)
	}
	b.mu.Unlock()
	if joined != nil {
		// The create answers once the Computer is in the office (at most
		// 5 s), so the caller's next tool call finds it; a hub that does
		// not answer in time leaves the connection retrying behind.
		select {
		case <-joined:
		case <-time.After(5 * time.Second):
			b.p.log.Warn("sandbox's Computer has not joined its office within 5 s; still trying", "id", b.id, "office", s.office)
		}
	}
	return nil
}

// joinOffice starts the box's Computer in office as name (b.mu held)
// and returns a channel closed once it has joined.
func (b *box) joinOffice(office, name string) chan struct{} {
	ctx, stop := context.WithCancel(b.p.ctx)
	joined := make(chan struct{})
	var once sync.Once
	b.office, b.computer, b.officeStop, b.officeDone = office, name, stop, make(chan struct{})
	done := b.officeDone
	p := b.p
	go func() {
		defer close(done)
		err := b.d.JoinOffice(ctx, aiod.OfficeOptions{Server: p.cfg.Server, Office: office, Name: name, BundleID: name, Token: p.cfg.ServerToken,
			ProtocolVersion: p.cfg.ProtocolVersion, OnJoined: func() { once.Do(func() { close(joined) }) }})
		if err != nil && ctx.Err() == nil {
			p.log.Warn("sandbox's office connection ended", "id", b.id, "office", office, "err", err)
		}
	}()
	return joined
}

// sandboxConfig is the isolation of the box.
func (b *box) sandboxConfig() sandbox.Config {
	c := sandbox.Config{Workspace: b.dir, Network: sandbox.NetworkNone, Memory: int64(b.limits.Memory), Pids: b.limits.Pids,
		CPUs: b.limits.CPUs, Hostname: "sandbox", Name: b.id}
	switch b.network {
	case NetworkHost:
		c.Network = sandbox.NetworkHost
	case NetworkEgress:
		c.Network, c.Attach, c.Nameserver = sandbox.NetworkEgress, b.link.Attach, b.link.Host
	}
	if b.uid != 0 {
		c.UID, c.GID = b.uid, b.uid
	}
	if b.machine {
		c.UserName = "root"
		c.System = &sandbox.System{IDs: b.uid, Upper: b.upper(), Mask: b.p.mask}
	}
	return c
}

// ready is what every use of the box passes first (an API request, a
// tool call, a proxied port): it waits for the box to have started,
// resumes it when paused, and counts the use as activity.
func (b *box) ready(ctx context.Context) error {
	select {
	case <-b.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.lastActive.Store(time.Now().UnixNano())
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return errClosed
	case b.state == Paused:
		return b.resumeLocked(nil)
	}
	return nil
}

// pause freezes every process of the box.
func (b *box) pause() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return notFound(b.id)
	case b.state == Paused:
		return nil
	case b.state != Running:
		return &Error{Status: http.StatusConflict, Message: "the sandbox is " + string(b.state)}
	}
	if err := b.sb.Pause(); err != nil {
		if errors.Is(err, sandbox.ErrNoCgroups) {
			return &Error{Status: http.StatusNotImplemented, Message: "this pool cannot pause: it has no cgroup freezer (run it as root on a machine with cgroups)"}
		}
		b.p.log.Warn("pause failed", "id", b.id, "err", err)
		return &Error{Status: http.StatusInternalServerError, Message: "pause failed: " + err.Error()}
	}
	b.state = Paused
	return nil
}

// resume thaws the box; timeout, if set, is its new lifetime from now.
func (b *box) resume(timeout *int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return notFound(b.id)
	case b.state == Starting:
		return &Error{Status: http.StatusConflict, Message: "the sandbox is starting"}
	}
	return b.resumeLocked(timeout)
}

// resumeLocked thaws the box (b.mu held). The deadline becomes now +
// timeout when one is given; else a deadline that has passed (the one
// that paused it) is re-armed with the lifetime the create asked for.
func (b *box) resumeLocked(timeout *int) error {
	if b.state == Paused {
		if err := b.sb.Resume(); err != nil {
			b.p.log.Warn("resume failed", "id", b.id, "err", err)
			return &Error{Status: http.StatusInternalServerError, Message: "resume failed: " + err.Error()}
		}
		b.state = Running
		b.p.metrics.resumed()
	}
	now := time.Now()
	switch {
	case timeout != nil:
		b.timeoutS = *timeout
		b.expires = time.Time{}
		if *timeout > 0 {
			b.expires = now.Add(time.Duration(*timeout) * time.Second)
		}
	case b.timeoutS > 0 && (b.expires.IsZero() || !now.Before(b.expires)):
		b.expires = now.Add(time.Duration(b.timeoutS) * time.Second)
	}
	b.lastActive.Store(now.UnixNano())
	return nil
}

// setTimeout moves the deadline to now + seconds (0: none).
func (b *box) setTimeout(seconds int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timeoutS = seconds
	b.expires = time.Time{}
	if seconds > 0 {
		b.expires = time.Now().Add(time.Duration(seconds) * time.Second)
	}
}

// due reports the action whose time has come at now: OnTimeoutKill,
// OnTimeoutPause, or "". A pause it reports consumes the deadline (a
// resume re-arms it), so it is reported once.
func (b *box) due(now time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.state != Running && b.state != Paused {
		return ""
	}
	expired := !b.expires.IsZero() && !now.Before(b.expires)
	idle := b.idle > 0 && b.state == Running && now.Sub(time.Unix(0, b.lastActive.Load())) >= b.idle
	if !expired && !idle {
		return ""
	}
	if b.onTimeout == OnTimeoutKill {
		return OnTimeoutKill
	}
	if expired {
		b.expires = time.Time{}
	}
	if b.state == Paused {
		return ""
	}
	return OnTimeoutPause
}

// object is the box as the API shows it.
func (b *box) object(base string) Sandbox {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Sandbox{ID: b.id, State: b.state, Template: b.template, Office: b.office, Computer: b.computer,
		CreatedAt: b.created.UTC().Truncate(time.Millisecond), OnTimeout: b.onTimeout, IdleTimeoutS: int(b.idle / time.Second),
		Limits: b.limits, Network: b.network, Egress: b.egress, Machine: b.machine, Metadata: b.metadata, Parent: nullable(b.parent),
		Ancestors: slices.Clone(b.ancestors),
		APIURL:    base + "/sandboxes/" + b.id, MCPURL: base + "/sandboxes/" + b.id + "/mcp"}
	if b.closed {
		s.State = Stopped
	}
	if s.Office == "" {
		s.Office = b.officeName // while starting
	}
	if s.Metadata == nil {
		s.Metadata = map[string]string{}
	}
	if !b.expires.IsZero() {
		t := b.expires.UTC().Truncate(time.Millisecond)
		s.ExpiresAt = &t
	}
	return s
}

// serve answers a request for the box's own API (the path already
// stripped of /sandboxes/{id}).
func (b *box) serve(w http.ResponseWriter, r *http.Request) {
	if err := b.ready(r.Context()); err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no sandbox %q", b.id))
		return
	}
	b.mu.Lock()
	h := b.handler
	b.mu.Unlock()
	h.ServeHTTP(w, r)
}

// dialPort opens a connection to 127.0.0.1:port in the box's network.
func (b *box) dialPort(ctx context.Context, port int) (net.Conn, error) {
	b.mu.Lock()
	sb := b.sb
	b.mu.Unlock()
	if sb == nil {
		return nil, errClosed
	}
	return sb.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// touch is the port proxy's ready.
func (b *box) touch(ctx context.Context) error { return b.ready(ctx) }

// usage reads the box's metrics: its cgroups, and its workspace's size
// (walked at most every 5 s).
func (b *box) usage() (Metrics, error) {
	b.mu.Lock()
	sb, closed := b.sb, b.closed
	b.mu.Unlock()
	if closed || sb == nil {
		return Metrics{}, notFound(b.id)
	}
	u, err := sb.Usage()
	if errors.Is(err, sandbox.ErrNoCgroups) {
		return Metrics{}, &Error{Status: http.StatusNotImplemented, Message: "this pool has no cgroups to read (run it as root on a machine with cgroups)"}
	}
	if err != nil {
		return Metrics{}, &Error{Status: http.StatusInternalServerError, Message: "reading the sandbox's cgroups: " + err.Error()}
	}
	return Metrics{CPUUsageNs: u.CPUUsageNs, MemoryBytes: u.MemoryBytes, MemoryLimitBytes: u.MemoryLimitBytes,
		Pids: u.Pids, PidsLimit: u.PidsLimit, DiskBytes: b.diskBytes(), Since: b.created.UTC().Truncate(time.Millisecond)}, nil
}

// diskBytes is the space the workspace's files take (blocks, as du),
// cached for 5 s; with a disk of its own, its filesystem's used blocks
// (statfs, as df: cheap, so read each time).
func (b *box) diskBytes() uint64 {
	if b.image != "" {
		n, _ := diskUsed(b.dir)
		return n
	}
	b.mu.Lock()
	if time.Since(b.diskAt) < 5*time.Second {
		d := b.disk
		b.mu.Unlock()
		return d
	}
	b.mu.Unlock()
	var total uint64
	_ = filepath.WalkDir(b.dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := e.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += uint64(st.Blocks) * 512
			}
		}
		return nil
	})
	b.mu.Lock()
	b.disk, b.diskAt = total, time.Now()
	b.mu.Unlock()
	return total
}

// close ends the box: its office seat, its daemon's processes and its
// sandbox, then its workspace (moved under Root/kept when keep). It
// returns when all have ended or ctx has.
func (b *box) close(ctx context.Context, keep bool) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	stop, done, d, link := b.officeStop, b.officeDone, b.d, b.link
	if b.state == Paused && b.sb != nil {
		// The daemon's shutdown waits for its sessions' processes,
		// which cannot end while frozen: thawed into their end.
		if err := b.sb.Resume(); err != nil {
			b.p.log.Warn("resume before close failed", "id", b.id, "err", err)
		}
	}
	b.mu.Unlock()
	b.startedOnce.Do(func() { close(b.started) })
	if stop != nil {
		stop()
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	b.p.ports.forget(b.id)
	if d != nil {
		if err := d.Shutdown(ctx); err != nil {
			b.p.log.Warn("sandbox shutdown", "id", b.id, "err", err)
		}
	}
	if link != nil {
		_ = link.Close()
	}
	b.removeWorkspace(keep)
}

// upper is a whole machine's upper layer (Root/layers/{id}).
func (b *box) upper() string { return filepath.Join(b.p.root, "layers", b.id) }

// removeWorkspace deletes the workspace, or moves it under Root/kept,
// and a whole machine's upper layer.
func (b *box) removeWorkspace(keep bool) {
	if b.machine {
		if keep { // a copy: the store goes with the pool
			kept := filepath.Join(b.p.root, "kept", b.id)
			if out, err := exec.Command("cp", "-a", b.dir, kept).CombinedOutput(); err != nil {
				b.p.log.Warn("workspace not kept", "id", b.id, "err", err, "out", string(out))
			} else {
				b.p.log.Info("workspace kept", "id", b.id, "path", kept)
			}
		}
		if err := deleteLayer(b.upper()); err != nil {
			b.p.log.Warn("upper layer not removed", "id", b.id, "err", err)
		}
		return
	}
	if b.image != "" {
		b.removeDisk(keep)
		return
	}
	if keep {
		kept := filepath.Join(b.p.root, "kept", b.id)
		if err := os.Rename(b.dir, kept); err == nil {
			b.p.log.Info("workspace kept", "id", b.id, "path", kept)
			return
		}
	}
	if err := os.RemoveAll(b.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.p.log.Warn("workspace not removed", "id", b.id, "err", err)
	}
}

// removeDisk unmounts the workspace's filesystem (its loop device then
// detaches itself) and deletes its image, or moves it to
// Root/kept/{id}.img. Whatever the box's start reached (no image, an
// image not mounted, a mounted one) ends removed. A mount that cannot
// be removed is left in place, its directory and image with it: the
// next start of the pool removes them.
func (b *box) removeDisk(keep bool) {
	if err := unmountDisk(b.dir); err != nil {
		b.p.log.Warn("workspace not removed", "id", b.id, "err", err)
		return
	}
	if err := os.Remove(b.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.p.log.Warn("workspace not removed", "id", b.id, "err", err)
	}
	if keep {
		kept := filepath.Join(b.p.root, "kept", b.id+".img")
		if err := os.Rename(b.image, kept); err == nil {
			b.p.log.Info("workspace kept", "id", b.id, "path", kept)
			return
		}
	}
	if err := os.Remove(b.image); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.p.log.Warn("workspace image not removed", "id", b.id, "err", err)
	}
}
