package pool

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2c-smcp/a2c-go/aiod"
	"github.com/a2c-smcp/a2c-go/aiod/internal/egress"
	"github.com/a2c-smcp/a2c-go/aiod/internal/janitor"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/internal/origin"
)

// Defaults of a pool (aiod pool's flags).
const (
	DefaultListen  = "127.0.0.1:18100"
	DefaultMax     = 64
	DefaultWarm    = 2
	DefaultMemory  = 1 << 30
	DefaultPids    = 512
	DefaultCPUs    = 1.0
	DefaultTimeout = 300 // seconds
	// BaseTemplate is the template of an empty workspace.
	BaseTemplate = "base"
	// DefaultName is the Computer name of a sandbox that joins an office.
	DefaultName = "sandbox"
	// MaxTimeout bounds timeout_s and idle_timeout_s: 30 days.
	MaxTimeout = 30 * 24 * 3600
	// ShutdownBound is how long Close gives every sandbox to end.
	ShutdownBound = 10 * time.Second
	// MinDisk is the smallest --disk. A smaller workspace holds too
	// little to be of use (ext4 gives 16 MiB 4096 files and 14.4 MiB of
	// data; its metadata and reserve take 10% of a small image, 3% of 1
	// GiB), and a size given without its unit (--disk 1024) is refused
	// rather than giving every sandbox 1 KiB.
	MinDisk = 16 << 20
)

// Config configures a [Pool].
type Config struct {
	// Root holds the sandboxes' workspaces (Root/live/{id}) and the ones
	// a delete kept (Root/kept/{id}), and with Disk their images
	// (Root/disks/{id}.img, kept ones as Root/kept/{id}.img). Default
	// /var/lib/aiod/pool for root, else $XDG_STATE_HOME/aiod/pool. One
	// pool per root.
	Root string
	// Disk, when above 0, bounds each workspace to that many bytes (at
	// least [MinDisk]): the workspace is an ext4 filesystem of its own,
	// a sparse image file mounted through a loop device (disk_linux.go),
	// and a write past it fails with ENOSPC in that sandbox only. It
	// needs root and mkfs.ext4 (e2fsprogs). 0: workspaces are
	// directories sharing Root's filesystem.
	Disk int64
	// Max bounds the sandboxes in use (default [DefaultMax]); a create
	// past it answers 429. Warm sandboxes are not counted.
	Max int
	// Warm is how many sandboxes of the base template with the default
	// limits are kept started and unclaimed (0: none).
	Warm int
	// WarmTemplates is, by template (one made from a snapshot, with
	// Machine), how many whole machines of it with the default limits
	// are kept started and unclaimed, once the template exists.
	WarmTemplates map[string]int
	// Templates maps a template's name to the directory its workspaces
	// start as a copy of. "base" (empty) always exists.
	Templates map[string]string
	// Memory, Pids and CPUs are the default per-sandbox limits (zero:
	// 1GiB, 512, 1).
	Memory int64
	Pids   int
	CPUs   float64
	// AllowHostNetwork lets a create ask for network "host".
	AllowHostNetwork bool
	// Egress lets a create ask for network "egress": the pool makes an
	// egress network (package aiod/internal/egress) of EgressSubnet
	// (default 10.233.0.0/16; no address of the host may be in it),
	// whose sandboxes' resolvers ask EgressDNS (default the host's
	// /etc/resolv.conf servers). It needs root, iproute2 and nftables,
	// and turns the host's IPv4 forwarding on.
	Egress       bool
	EgressSubnet netip.Prefix
	EgressDNS    []netip.AddrPort
	// Machine lets a create ask for a whole machine ("machine": true,
	// or from_snapshot; sandbox.System): root inside a user namespace
	// of its own, whose 65536 ids are a range of the host's no other
	// sandbox holds (from [MachineIDBase]), and a writable system on
	// layers, its writes (and its workspace) in Root/layers/{id}, which
	// snapshots and forks take whole. It needs root, nsenter
	// (util-linux), a kernel with overlayfs on idmapped layers (Linux
	// 6.x), and for snapshots btrfs-progs; the pool builds the mask of
	// the host's system at start (Root/mask, a second or so). Disk bounds
	// what a machine writes (its upper layer and workspace, not what it
	// shares with the snapshot it came from) through the store's quota
	// groups: past it a write fails with EDQUOT.
	Machine bool
	// MachineAll (with Machine) makes a whole machine what a create of
	// the base template gets when it does not say ("machine" absent),
	// but with network host (a machine's network is its own): every
	// sandbox is one unless it asks "machine": false. The warm sandboxes
	// (Warm) are machines then.
	MachineAll bool
	// Server is the hub sandboxes that name an office join, with
	// ServerToken presented to it (default Token).
	Server, ServerToken string
	// ProtocolVersion is the A2C-SMCP version the sandboxes' Computers
	// speak (default smcp.ProtocolVersion).
	ProtocolVersion string
	// Token guards every route of the pool, each sandbox's API and the
	// port proxy; empty: none (loopback only).
	Token string
	// UIDBase is the first host uid of the range sandbox accounts take;
	// each live sandbox has its own. Default: the first range of 65536
	// from [DefaultUIDBase] up that no other pool of the host holds.
	UIDBase int
	// Daemon is the template of every sandbox's daemon configuration
	// (interpreters, session caps, ...); its Workspace, APIKey, Isolation,
	// Sandbox and Logger are the pool's to set.
	Daemon aiod.Config
	// Listen is the pool's address (host:port), for the URLs it answers
	// with when no request gives one, and for its Host rule;
	// AllowedHosts and AllowedOrigins as aiod's.
	Listen                       string
	AllowedHosts, AllowedOrigins []string
	// Logger receives the pool's logs; Registerer, if set, its metrics;
	// Metrics, if set, is served at GET /metrics (behind the token).
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Metrics    http.Handler
	// Fallback, if set, serves every request for a route the pool does
	// not own (a2c up: its default sandbox's API on the same address);
	// it applies its own Host, Origin and key checks. Nil: 404.
	Fallback http.Handler
	// CreateConcurrency bounds the sandboxes being started at once
	// (default 2 per CPU, at least 4); more creates wait their turn.
	CreateConcurrency int
}

// DefaultUIDBase is the first uid of the range sandbox accounts take:
// far above any account a distribution creates, and below the 2^31 that
// some tools mishandle. The base itself owns every workspace on the
// host; each sandbox (base+1, base+2, ...) sees its own as its account's
// through an idmapped mount, so what one sandbox writes is never owned
// by another's account, even when a uid is handed out again.
const DefaultUIDBase = 1_900_000_000

// uidRange is how many uids the range holds.
const uidRange = 1 << 16

// Pool runs many sandboxes. Make one with [New]; its methods are safe
// for concurrent use. Close ends every sandbox.
type Pool struct {
	cfg     Config
	log     *slog.Logger
	root    string // absolute
	lock    *os.File
	metrics *poolMetrics

	mu      sync.Mutex
	boxes   map[string]*box // created (claimed) sandboxes, starting ones included
	office  map[string]string
	warm    []*box // started and unclaimed
	warming int    // warm sandboxes being started
	// warmT and warmingT are warm and warming for each template of
	// Config.WarmTemplates.
	warmT    map[string][]*box
	warmingT map[string]int
	uids     map[int]bool
	closed   bool

	createSem chan struct{} // bounds starts (createConcurrency)
	refill    chan struct{} // wakes the warm refiller
	ctx       context.Context
	stop      context.CancelFunc
	bg        sync.WaitGroup // the reaper, the refiller and warm starts
	ports     *portProxy
	policy    *origin.Policy   // the Host and Origin rule of the pool's routes
	hostUIDs  map[int]bool     // uids of the host's accounts, never handed out
	lastUse   atomic.Int64     // the latest request or create (Unix ns), for the idle trim
	lastClaim time.Time        // when a create last took a warm sandbox (p.mu)
	uidLock   *os.File         // holds the pool's uid range (reserveUIDs); nil for an unprivileged pool
	single    bool             // no distinct accounts: an unprivileged pool
	mkfs      string           // mkfs.ext4's path, with Disk
	egress    *egress.Network  // with Config.Egress
	ranges    map[int]*os.File // with Machine: each box's id range lock, by its first id (p.mu)
	mask      string           // with Machine: the mask (sandbox.BuildMask)
	btrfs     bool             // with Machine: the layer store is btrfs (layers_linux.go)
	// machinesDone is closed once the mask and the layer store are
	// made (or failed: machinesErr), by startMachines' goroutine; btrfs
	// is set before.
	machinesDone chan struct{}
	machinesErr  error
	snapshots    map[string]*snapshot // (p.mu)
	templates    map[string]*Template // made from snapshots; nil while one is made (p.mu)
}

// checkDisk refuses a --disk below MinDisk.
func checkDisk(n int64) error {
	if n < MinDisk {
		return fmt.Errorf("must be at least %s per workspace, got %s", sandbox.FormatSize(MinDisk), sandbox.FormatSize(n))
	}
	return nil
}

// New checks cfg, takes the pool's root and starts the background work
// (timeouts, the warm pool). The caller must Close it.
func New(cfg Config) (*Pool, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Max == 0 {
		cfg.Max = DefaultMax
	}
	if cfg.Max < 1 || cfg.Max > uidRange/2 {
		return nil, fmt.Errorf("max must be from 1 to %d, got %d", uidRange/2, cfg.Max)
	}
	total := cfg.Warm
	for name, n := range cfg.WarmTemplates {
		if !templateName.MatchString(name) || name == BaseTemplate || n < 0 {
			return nil, fmt.Errorf("warm %s=%d: a template's name and a whole number from 0", name, n)
		}
		total += n
	}
	if len(cfg.WarmTemplates) > 0 && !cfg.Machine {
		return nil, errors.New("warm NAME=N keeps whole machines of a template: it needs Machine")
	}
	if cfg.Warm < 0 || total > cfg.Max {
		return nil, fmt.Errorf("warm must be from 0 to max (%d), got %d", cfg.Max, cfg.Warm)
	}
	if cfg.Memory == 0 {
		cfg.Memory = DefaultMemory
	}
	if cfg.Pids == 0 {
		cfg.Pids = DefaultPids
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = DefaultCPUs
	}
	if err := sandbox.CheckMemory(cfg.Memory); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	if err := sandbox.CheckPids(cfg.Pids); err != nil {
		return nil, fmt.Errorf("pids: %w", err)
	}
	if err := sandbox.CheckCPUs(cfg.CPUs); err != nil {
		return nil, fmt.Errorf("cpus: %w", err)
	}
	if cfg.UIDBase != 0 && (cfg.UIDBase < 1000 || cfg.UIDBase > MachineIDBase-uidRange) {
		return nil, fmt.Errorf("uid base %d is out of range (1000 to %d; the ids above are whole machines')", cfg.UIDBase, MachineIDBase-uidRange)
	}
	if cfg.ServerToken == "" {
		cfg.ServerToken = cfg.Token
	}
	if cfg.CreateConcurrency <= 0 {
		cfg.CreateConcurrency = max(4, 2*runtime.NumCPU())
	}
	for name, dir := range cfg.Templates {
		if err := checkTemplate(name, dir); err != nil {
			return nil, err
		}
	}
	single := os.Geteuid() != 0 || sandbox.InUserNamespace()
	var mkfs string
	if cfg.Disk != 0 {
		if err := checkDisk(cfg.Disk); err != nil {
			return nil, fmt.Errorf("disk: %w", err)
		}
		var err error
		if mkfs, err = diskTool(single); err != nil {
			return nil, err
		}
	}
	policy, err := origin.New(origin.Config{Listen: cfg.Listen, Hosts: cfg.AllowedHosts, Origins: cfg.AllowedOrigins})
	if err != nil {
		return nil, err
	}
	root, err := poolRoot(cfg.Root)
	if err != nil {
		return nil, err
	}
	lock, err := takeRoot(root)
	if err != nil {
		return nil, err
	}
	var uidLock *os.File
	if !single {
		if uidLock, cfg.UIDBase, err = reserveUIDs(cfg.UIDBase); err != nil {
			lock.Close()
			return nil, err
		}
	}
	var egn *egress.Network
	if cfg.Egress {
		if single {
			err = errors.New("needs a pool run as root (it makes veth pairs and nftables rules)")
		} else {
			egn, err = newEgress(cfg)
		}
		if err != nil {
			lock.Close()
			if uidLock != nil {
				uidLock.Close()
			}
			return nil, fmt.Errorf("egress: %w", err)
		}
	}
	p := &Pool{cfg: cfg, log: cfg.Logger, root: root, lock: lock, boxes: map[string]*box{}, office: map[string]string{},
		uids: map[int]bool{}, policy: policy, createSem: make(chan struct{}, cfg.CreateConcurrency), refill: make(chan struct{}, 1),
		hostUIDs: hostUIDs(), single: single, uidLock: uidLock, mkfs: mkfs, egress: egn, ranges: map[int]*os.File{},
		snapshots: map[string]*snapshot{}, templates: map[string]*Template{}, warmT: map[string][]*box{}, warmingT: map[string]int{}}
	if cfg.Machine {
		if err := p.checkMachines(); err != nil {
			if egn != nil {
				_ = egn.Close()
			}
			lock.Close()
			if uidLock != nil {
				uidLock.Close()
			}
			return nil, fmt.Errorf("machine: %w", err)
		}
	}
	if cfg.Disk > 0 {
		if warn := diskRoom(filepath.Join(root, "disks"), cfg.Disk, cfg.Max+cfg.Warm); warn != "" {
			p.log.Warn(warn)
		}
	}
	p.ctx, p.stop = context.WithCancel(context.Background())
	p.metrics = newPoolMetrics(p)
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(p.metrics); err != nil {
			p.stop()
			if egn != nil {
				_ = egn.Close()
			}
			lock.Close()
			if uidLock != nil {
				uidLock.Close()
			}
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	p.ports = newPortProxy(portProxyConfig{Token: cfg.Token, Logger: cfg.Logger, Lookup: p.portTarget})
	if cfg.Machine {
		p.startMachines()
	}
	p.bg.Add(2)
	go func() { defer p.bg.Done(); p.reap() }()
	go func() { defer p.bg.Done(); p.refillWarm() }()
	p.wakeRefill()
	return p, nil
}

// checkMachines checks that this pool can run whole machines.
func (p *Pool) checkMachines() error {
	if p.single {
		return errors.New("needs a pool run as root")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		return errors.New("needs nsenter (Debian util-linux)")
	}
	return nil
}

// startMachines builds the mask of the host's system and the layer
// store, in the background.
func (p *Pool) startMachines() {
	p.mask = filepath.Join(p.root, "mask")
	// The mask (a walk of the host's system, a second or so) and the
	// store are made in the background: the pool answers at once, and
	// the first machine waits for them (machinesReady).
	p.machinesDone = make(chan struct{})
	p.bg.Go(func() {
		defer close(p.machinesDone)
		t0 := time.Now()
		if err := sandbox.BuildMask(p.mask); err != nil {
			p.machinesErr = err
			p.log.Warn("whole machines are not offered: the mask of the host's system failed", "err", err)
			return
		}
		p.log.Debug("the mask of the host's system is built", "took", time.Since(t0).Round(time.Millisecond))
		// The layer store, empty (a store a pool that died left goes).
		btrfs, err := openLayers(p.root, filepath.Join(p.root, "layers"), p.cfg.Disk > 0)
		if err != nil {
			p.machinesErr = err
			p.log.Warn("whole machines are not offered: the layer store failed", "err", err)
			return
		}
		p.btrfs = btrfs
		if !btrfs {
			p.log.Warn("the layer store is not btrfs (no btrfs-progs here): sandboxes cannot be snapshotted or forked")
			if p.cfg.Disk > 0 {
				p.machinesErr = errors.New("--disk bounds a whole machine through the layer store's quotas, which needs btrfs (btrfs-progs)")
			}
		}
	})
}

// machinesReady waits for the mask and the store (startMachines) and
// reports whether machines can be made.
func (p *Pool) machinesReady(ctx context.Context) error {
	select {
	case <-p.machinesDone:
	case <-ctx.Done():
		return &Error{Status: http.StatusServiceUnavailable, Message: "the create was abandoned while the pool prepared its layers"}
	case <-p.ctx.Done():
		return &Error{Status: http.StatusServiceUnavailable, Message: "the pool is shutting down"}
	}
	if p.machinesErr != nil {
		return &Error{Status: http.StatusInternalServerError, Message: "whole machines are not available: " + p.machinesErr.Error()}
	}
	return nil
}

// DefaultEgressSubnet is the subnet of a pool's egress network.
var DefaultEgressSubnet = netip.MustParsePrefix("10.233.0.0/16")

// newEgress makes the pool's egress network. Its nftables table and
// interface names are the pool's own, named after its uid range (which
// no other pool of the host holds), and its subnet must hold no address
// of the host's: a second pool, or a network the host is on, needs
// another (--egress-subnet).
func newEgress(cfg Config) (*egress.Network, error) {
	subnet := cfg.EgressSubnet
	if !subnet.IsValid() {
		subnet = DefaultEgressSubnet
	}
	ifaces, _ := net.Interfaces()
	for _, ifc := range ifaces {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, _ := netip.AddrFromSlice(n.IP)
			ones, _ := n.Mask.Size()
			if hp := netip.PrefixFrom(ip.Unmap(), ones); hp.IsValid() && hp.Overlaps(subnet) {
				return nil, fmt.Errorf("subnet %s overlaps %s on the host's %s; choose another with --egress-subnet", subnet, hp.Masked(), ifc.Name)
			}
		}
	}
	k := strconv.FormatInt(int64(cfg.UIDBase/uidRange), 36)
	return egress.New(egress.Config{Subnet: subnet, Table: "aiod_pool_" + k, Prefix: "p" + k, Upstream: cfg.EgressDNS})
}

// poolRoot is the pool's root directory, made if missing (0711: the
// sandboxes' directories below it are not listed to other accounts).
func poolRoot(root string) (string, error) {
	if root == "" {
		// Root of the host, not of the user namespace an unprivileged
		// pool runs itself in (whose "root" cannot write /var/lib).
		if os.Geteuid() == 0 && !sandbox.InUserNamespace() {
			root = "/var/lib/aiod/pool"
		} else {
			state := os.Getenv("XDG_STATE_HOME")
			if state == "" {
				home, err := os.UserHomeDir()
				if err != nil {
					return "", fmt.Errorf("root: %w", err)
				}
				state = filepath.Join(home, ".local", "state")
			}
			root = filepath.Join(state, "aiod", "pool")
		}
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("root: %w", err)
	}
	// The root is 0711; what holds workspaces (which a sandbox's root may
	// fill with set-id programs of the pool's base uid) is 0700: no
	// account of the host reaches them.
	if err := os.MkdirAll(root, 0o711); err != nil {
		return "", fmt.Errorf("root: %w", err)
	}
	for _, d := range []string{filepath.Join(root, "live"), filepath.Join(root, "kept"), filepath.Join(root, "disks")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("root: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return "", fmt.Errorf("root: %w", err)
		}
	}
	return root, nil
}

// Create starts a sandbox for req, from the warm pool when it fits, and
// returns it running. base is the pool's URL as the caller reaches it
// (for api_url; empty: the listen address). Errors are *Error: 400 for
// bad input (naming the field), 429 at Max, 503 when closed.
func (p *Pool) Create(ctx context.Context, req CreateRequest, base string) (Sandbox, error) {
	p.lastUse.Store(time.Now().UnixNano())
	spec, err := p.check(req)
	if err != nil {
		return Sandbox{}, err
	}
	b, err := p.admit(spec)
	if err != nil {
		return Sandbox{}, err
	}
	start := time.Now()
	source := "warm"
	if !b.claimedWarm {
		source = "cold"
		if err := p.start(ctx, b); err != nil {
			p.end(context.Background(), b, false)
			return Sandbox{}, err
		}
	}
	if err := b.begin(spec); err != nil {
		p.end(context.Background(), b, false)
		return Sandbox{}, &Error{Status: http.StatusInternalServerError, Message: "sandbox did not start: " + err.Error()}
	}
	p.metrics.created(source, time.Since(start))
	p.log.Info("sandbox created", "id", b.id, "source", source, "template", spec.template, "office", spec.office,
		"took", time.Since(start).Round(time.Microsecond))
	return b.object(p.baseURL(base)), nil
}

// spec is a checked create request with the pool's defaults filled in.
type spec struct {
	template, office, name, onTimeout, network string
	timeout, idle                              time.Duration
	env                                        []string
	limits                                     Limits
	metadata                                   map[string]string
	// egress is the rules as the create gave them (nil unless network
	// egress), rules as the egress network reads them.
	egress *Egress
	rules  egress.Rules
	// from is the snapshot the sandbox starts from (nil: none);
	// machine, whether it is a whole machine (from implies it).
	from    *snapshot
	machine bool
}

// fitsWarmTemplate reports whether a warm machine of s's template
// (default limits, no network) can serve s.
func (p *Pool) fitsWarmTemplate(s spec) bool {
	return s.from != nil && s.network == NetworkNone && s.limits == p.defaultLimits() && p.cfg.WarmTemplates[s.template] > 0
}

// fitsWarm reports whether a warm sandbox (base template, default
// limits, no network; a whole machine with MachineAll, from no
// snapshot) can serve s.
func (p *Pool) fitsWarm(s spec) bool {
	return s.template == BaseTemplate && s.network == NetworkNone && s.limits == p.defaultLimits() && s.machine == p.cfg.MachineAll && s.from == nil
}

func (p *Pool) defaultLimits() Limits {
	return Limits{Memory: Size(p.cfg.Memory), Pids: p.cfg.Pids, CPUs: p.cfg.CPUs}
}

// admit reserves a place for a new sandbox: a warm one when s fits it,
// else a fresh box in state starting, counted against Max.
func (p *Pool) admit(s spec) (*box, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, &Error{Status: http.StatusServiceUnavailable, Message: "the pool is shutting down"}
	}
	if len(p.boxes) >= p.cfg.Max {
		return nil, &Error{Status: http.StatusTooManyRequests,
			Message: fmt.Sprintf("the pool holds its maximum of %d sandboxes; delete one or start the pool with a larger --max", p.cfg.Max)}
	}
	if s.office != "" {
		if id, ok := p.office[s.office]; ok {
			return nil, &Error{Status: http.StatusConflict, Message: fmt.Sprintf("office %q already has sandbox %s", s.office, id)}
		}
	}
	// The snapshot was checked before p.mu was taken: a delete may have
	// come between. From here the box holds it (DeleteSnapshot sees it).
	if s.from != nil && p.snapshots[s.from.ID] == nil {
		return nil, &Error{Status: http.StatusConflict, Message: fmt.Sprintf("snapshot %s was deleted", s.from.ID)}
	}
	var b *box
	if ws := p.warmT[s.template]; p.fitsWarmTemplate(s) && len(ws) > 0 && ws[0].parent == s.from.ID {
		b = ws[0]
		p.warmT[s.template] = ws[1:]
		b.claimedWarm = true
		p.lastClaim = time.Now()
		b.created = time.Now()
		p.wakeRefill()
	} else if p.fitsWarm(s) && len(p.warm) > 0 {
		b = p.warm[0]
		p.warm = p.warm[1:]
		b.claimedWarm = true
		p.lastClaim = time.Now()
		b.created = time.Now() // its life as this create's sandbox starts now
		p.wakeRefill()
	} else {
		uid, err := p.takeUID(s.machine)
		if err != nil {
			return nil, err
		}
		b = p.newBox(uid, s.template, s.network, s.limits, s.machine)
		b.egress, b.rules = s.egress, s.rules
		if s.from != nil {
			b.parent, b.ancestors = s.from.ID, append([]string{s.from.ID}, s.from.ancestors...)
		}
	}
	p.boxes[b.id] = b
	if s.office != "" {
		p.office[s.office] = b.id
	}
	b.officeName = s.office
	return b, nil
}

// newBox makes an unstarted box (p.mu held).
func (p *Pool) newBox(uid int, template, network string, limits Limits, machine bool) *box {
	id := newID()
	b := &box{p: p, id: id, uid: uid, template: template, network: network, limits: limits, machine: machine,
		dir: filepath.Join(p.root, "live", id), state: Starting, created: time.Now(), started: make(chan struct{})}
	if machine { // the workspace is in the upper layer: a snapshot has it
		b.dir = filepath.Join(b.upper(), "workspace")
		return b // (--disk is its layer's quota: box.start)
	}
	if p.cfg.Disk > 0 {
		b.image = filepath.Join(p.root, "disks", id+".img")
	}
	return b
}

// start builds a box's workspace, sandbox and daemon, bounded by the
// create concurrency.
func (p *Pool) start(ctx context.Context, b *box) error {
	select {
	case p.createSem <- struct{}{}:
	case <-ctx.Done():
		return &Error{Status: http.StatusServiceUnavailable, Message: "the create was abandoned while it waited its turn"}
	case <-p.ctx.Done():
		return &Error{Status: http.StatusServiceUnavailable, Message: "the pool is shutting down"}
	}
	defer func() { <-p.createSem }()
	if err := b.start(); err != nil {
		p.log.Warn("sandbox did not start", "id", b.id, "err", err)
		if errors.Is(err, egress.ErrFull) {
			return &Error{Status: http.StatusServiceUnavailable, Message: "every address of the pool's --egress-subnet is taken; delete a sandbox of network egress, or start the pool with a larger subnet"}
		}
		return &Error{Status: http.StatusInternalServerError, Message: "sandbox did not start: " + err.Error()}
	}
	return nil
}

// end takes b off the pool's books (its id and office: no request finds
// it from now on), closes it, and only then hands its uid back, so no
// other sandbox gets the account while b's processes may still run.
func (p *Pool) end(ctx context.Context, b *box, keep bool) {
	p.mu.Lock()
	if p.boxes[b.id] == b {
		delete(p.boxes, b.id)
	}
	if b.officeName != "" && p.office[b.officeName] == b.id {
		delete(p.office, b.officeName)
	}
	p.mu.Unlock()
	b.close(ctx, keep)
	p.releaseUID(b.uid)
}

// releaseUID hands uid back to the range (a whole machine's range to
// the host) and wakes the refiller.
func (p *Pool) releaseUID(uid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.uids, uid)
	if f := p.ranges[uid]; f != nil {
		f.Close()
		delete(p.ranges, uid)
	}
	p.wakeRefill()
}

// takeUID hands out the lowest free uid of the range (p.mu held); an
// unprivileged pool has one account for all (0 here: the sandbox's own).
// For a whole machine it is the first id of a range of 65536 of the
// sandbox's own (root inside), held until releaseUID.
func (p *Pool) takeUID(machine bool) (int, error) {
	if p.single {
		return 0, nil
	}
	if machine {
		base, lock, err := takeMachineRange()
		if err != nil {
			return 0, &Error{Status: http.StatusTooManyRequests, Message: err.Error()}
		}
		p.ranges[base] = lock
		return base, nil
	}
	for i := 1; i < uidRange; i++ { // UIDBase itself owns the workspaces (box.owner)
		uid := p.cfg.UIDBase + i
		if !p.uids[uid] && !p.hostUIDs[uid] {
			p.uids[uid] = true
			return uid, nil
		}
	}
	return 0, &Error{Status: http.StatusTooManyRequests, Message: "no free sandbox account is left in the uid range"}
}

// lookup returns the claimed sandbox id names.
func (p *Pool) lookup(id string) (*box, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.boxes[id]
	return b, ok
}

func notFound(id string) error {
	return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no sandbox %q", id)}
}

// portTarget is the port proxy's lookup: the claimed sandbox id names
// (the same box for its whole life).
func (p *Pool) portTarget(id string) (portTarget, bool) {
	b, ok := p.lookup(id)
	if !ok {
		return nil, false
	}
	return b, true
}

// Get returns sandbox id. It never resumes it.
func (p *Pool) Get(id, base string) (Sandbox, error) {
	b, ok := p.lookup(id)
	if !ok {
		return Sandbox{}, notFound(id)
	}
	return b.object(p.baseURL(base)), nil
}

// List returns the sandboxes f selects, oldest first.
func (p *Pool) List(f ListFilter, base string) []Sandbox {
	p.mu.Lock()
	boxes := make([]*box, 0, len(p.boxes))
	for _, b := range p.boxes {
		boxes = append(boxes, b)
	}
	p.mu.Unlock()
	slices.SortFunc(boxes, func(a, b *box) int { return a.created.Compare(b.created) })
	out := []Sandbox{}
	for _, b := range boxes {
		s := b.object(p.baseURL(base))
		if f.State != "" && string(s.State) != f.State || f.Office != "" && s.Office != f.Office {
			continue
		}
		match := true
		for k, v := range f.Metadata {
			if got, ok := s.Metadata[k]; !ok || got != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, s)
		}
	}
	return out
}

// Delete ends sandbox id: its office seat, every process, and its
// workspace unless keep (then moved under Root/kept).
func (p *Pool) Delete(ctx context.Context, id string, keep bool) error {
	b, ok := p.lookup(id)
	if !ok {
		return notFound(id)
	}
	p.end(ctx, b, keep)
	p.log.Info("sandbox deleted", "id", id, "kept_workspace", keep)
	return nil
}

// Pause freezes sandbox id's processes.
func (p *Pool) Pause(id, base string) (Sandbox, error) {
	b, ok := p.lookup(id)
	if !ok {
		return Sandbox{}, notFound(id)
	}
	if err := b.pause(); err != nil {
		return Sandbox{}, err
	}
	return b.object(p.baseURL(base)), nil
}

// Resume thaws sandbox id; timeout, if set, gives it a new deadline (0:
// none).
func (p *Pool) Resume(id string, timeout *int, base string) (Sandbox, error) {
	b, ok := p.lookup(id)
	if !ok {
		return Sandbox{}, notFound(id)
	}
	if err := b.resume(timeout); err != nil {
		return Sandbox{}, err
	}
	return b.object(p.baseURL(base)), nil
}

// SetTimeout moves sandbox id's deadline to now + seconds (0: none).
func (p *Pool) SetTimeout(id string, seconds int, base string) (Sandbox, error) {
	b, ok := p.lookup(id)
	if !ok {
		return Sandbox{}, notFound(id)
	}
	b.setTimeout(seconds)
	return b.object(p.baseURL(base)), nil
}

// Metrics reads sandbox id's usage. It never resumes it.
func (p *Pool) Metrics(id string) (Metrics, error) {
	b, ok := p.lookup(id)
	if !ok {
		return Metrics{}, notFound(id)
	}
	return b.usage()
}

// Close ends every sandbox (within [ShutdownBound]) and the background
// work, and releases the root.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	boxes := make([]*box, 0, len(p.boxes)+len(p.warm))
	for _, b := range p.boxes {
		boxes = append(boxes, b)
	}
	boxes = append(boxes, p.warm...)
	for _, ws := range p.warmT {
		boxes = append(boxes, ws...)
	}
	p.boxes, p.warm, p.office, p.warmT = map[string]*box{}, nil, map[string]string{}, map[string][]*box{}
	p.mu.Unlock()
	p.stop()
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownBound)
	defer cancel()
	var wg sync.WaitGroup
	for _, b := range boxes {
		wg.Add(1)
		go func() { defer wg.Done(); b.close(ctx, false) }()
	}
	wg.Wait()
	p.bg.Wait() // warm starts in flight close their own box once they see closed
	p.ports.close()
	if p.cfg.Machine {
		if err := removeLayers(filepath.Join(p.root, "layers")); err != nil {
			p.log.Warn("layer store not removed", "err", err)
		}
	}
	if p.egress != nil {
		if err := p.egress.Close(); err != nil {
			p.log.Warn("egress network not removed", "err", err)
		}
	}
	if p.cfg.Registerer != nil {
		p.cfg.Registerer.Unregister(p.metrics)
	}
	if p.uidLock != nil {
		p.uidLock.Close()
	}
	return p.lock.Close()
}

// baseURL is the pool's URL for api_url: base when the caller knows how
// it was reached, else the listen address.
func (p *Pool) baseURL(base string) string {
	if base != "" {
		return strings.TrimRight(base, "/")
	}
	return "http://" + p.cfg.Listen
}

// reap applies deadlines and idle timeouts, twice a second, until the
// pool closes.
func (p *Pool) reap() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	// A pool idles most of its life: the memory a burst of creates or
	// requests left behind goes back to the kernel once it is quiet.
	trim := janitor.Trimmer(5*time.Second, p.lastUse.Load)
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		p.mu.Lock()
		boxes := make([]*box, 0, len(p.boxes))
		for _, b := range p.boxes {
			boxes = append(boxes, b)
		}
		p.mu.Unlock()
		for _, b := range boxes {
			switch b.due(now) {
			case OnTimeoutKill:
				p.log.Info("sandbox timed out", "id", b.id, "action", "kill")
				ctx, cancel := context.WithTimeout(p.ctx, ShutdownBound)
				p.end(ctx, b, false)
				cancel()
			case OnTimeoutPause:
				p.log.Info("sandbox timed out", "id", b.id, "action", "pause")
				if err := b.pause(); err != nil {
					p.log.Warn("pause on timeout failed", "id", b.id, "err", err)
				}
			}
		}
		trim(now)
	}
}

// refillQuiet is how long after a claim the warm pool's refill waits.
const refillQuiet = 200 * time.Millisecond

// wakeRefill asks the refiller to look at the warm pool again.
func (p *Pool) wakeRefill() {
	select {
	case p.refill <- struct{}{}:
	default:
	}
}

// refillWarm keeps cfg.Warm sandboxes started and unclaimed, one start
// at a time, until the pool closes.
func (p *Pool) refillWarm() {
	if p.cfg.Warm == 0 && len(p.cfg.WarmTemplates) == 0 {
		return
	}
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.refill:
		}
		for {
			// A start takes most of a CPU for tens of milliseconds: it
			// waits until no sandbox has been claimed for refillQuiet, so
			// the claimer's first requests are not slowed by the refill
			// its claim asked for.
			p.mu.Lock()
			wait := refillQuiet - time.Since(p.lastClaim)
			p.mu.Unlock()
			if wait > 0 {
				select {
				case <-p.ctx.Done():
					return
				case <-time.After(wait):
				}
				continue
			}
			p.mu.Lock()
			b, tpl := p.nextWarmLocked()
			p.mu.Unlock()
			if b == nil {
				break
			}
			err := p.start(p.ctx, b)
			p.mu.Lock()
			keep := err == nil && !p.closed
			if tpl == "" {
				p.warming--
				if keep {
					p.warm = append(p.warm, b)
				}
			} else {
				p.warmingT[tpl]--
				// A template deleted (or made again) meanwhile: not its.
				keep = keep && p.templates[tpl] != nil && p.templates[tpl].SnapshotID == b.parent
				if keep {
					p.warmT[tpl] = append(p.warmT[tpl], b)
				}
			}
			p.mu.Unlock()
			if !keep {
				b.close(context.Background(), false)
				p.releaseUID(b.uid)
				if err != nil {
					p.log.Warn("warm sandbox did not start; retrying in 1 s", "err", err)
					select {
					case <-p.ctx.Done():
						return
					case <-time.After(time.Second):
					}
				}
			}
		}
	}
}

// nextWarmLocked makes the next warm box to start (p.mu held): the base
// template's first, then each template's of WarmTemplates that exists;
// nil when none is missing (or no id range is free).
func (p *Pool) nextWarmLocked() (*box, string) {
	if p.closed {
		return nil, ""
	}
	if len(p.warm)+p.warming < p.cfg.Warm {
		uid, err := p.takeUID(p.cfg.MachineAll)
		if err != nil {
			return nil, ""
		}
		p.warming++
		return p.newBox(uid, BaseTemplate, NetworkNone, p.defaultLimits(), p.cfg.MachineAll), ""
	}
	names := make([]string, 0, len(p.cfg.WarmTemplates))
	for name := range p.cfg.WarmTemplates {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t := p.templates[name]
		if t == nil || len(p.warmT[name])+p.warmingT[name] >= p.cfg.WarmTemplates[name] {
			continue
		}
		snap := p.snapshots[t.SnapshotID]
		if snap == nil {
			continue
		}
		uid, err := p.takeUID(true)
		if err != nil {
			return nil, ""
		}
		p.warmingT[name]++
		b := p.newBox(uid, name, NetworkNone, p.defaultLimits(), true)
		b.parent, b.ancestors = snap.ID, append([]string{snap.ID}, snap.ancestors...)
		return b, name
	}
	return nil, ""
}

// newID is a sandbox id: 20 characters of [a-z2-7] (100 random bits), a
// DNS label as the port hosts need.
func newID() string {
	var b [13]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))[:20]
}

// validID reports whether s can be an id (a cheap refusal before lookup).
func validID(s string) bool {
	if len(s) != 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// errClosed is the answer to a use of a sandbox that has ended.
var errClosed = errors.New("the sandbox has ended")
