package computer

// This file is the Computer's SKILL channel: the registry of package skill
// fed by the user's folder and by the MCP servers that publish skill://
// resources, and the answers to client:get_skills and client:get_skill.
//
// One goroutine (skillSet.run) does all the work: it polls the user
// folder, and it syncs a server when told that the server connected,
// went away, or reported a change of its resources. The hooks called by
// the rest of the Computer only record what is pending and wake it, so
// that neither the office connection's reader nor an upstream's notifier
// ever waits on a resources/read or an archive download. Every change of
// what the registry shows is announced with server:update_skills.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/computer/mcphost"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/skill"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// SkillsPollInterval is how often the user's skills folder is checked for
// changes (a stat walk; a folder that appears later is picked up).
const SkillsPollInterval = 2 * time.Second

// skillSyncTimeout bounds one server's sync (listing, reads, downloads).
const skillSyncTimeout = 5 * time.Minute

// Environment variables that override the SKILL channel's limits (the
// names the reference SDKs use).
const (
	envSkillInlineBudget = "A2C_SKILL_INLINE_BUDGET"
	envSkillMaxSize      = "A2C_SKILL_MAX_SIZE"
)

// skillSet is one Computer's SKILL channel state.
type skillSet struct {
	c       *Computer
	log     *slog.Logger
	reg     *skill.Registry
	staging string
	read    skill.ReadOptions

	stop context.CancelFunc
	done chan struct{}
	wake chan struct{}

	mu      sync.Mutex
	pending map[string]*skillWork // by bundle_id

	// Owned by the run goroutine.
	userFP      string
	userScanned bool
	servers     map[string]*serverSkills
}

// skillWork is what is pending for one server.
type skillWork struct {
	state bool            // connection state may have changed
	list  bool            // resources/list_changed
	uris  map[string]bool // resources/updated
}

// serverSkills is what the run goroutine knows of one server.
type serverSkills struct {
	src   *skill.MCPSource
	up    *mcphost.Upstream // the upstream last synced
	ready bool              // last seen ready with the resources capability
}

// skills returns the Computer's skill state, or nil before startSkills
// and after stopSkills.
func (c *Computer) skills() *skillSet { return c.skillState.Load() }

// startSkills builds the registry, reads the user folder once (so that
// the first client:get_skills lists it) and starts the goroutine that
// keeps the sources in step. Called once by New, before any upstream
// starts.
func (c *Computer) startSkills() error {
	staging := c.opts.SkillsStaging
	if staging == "" {
		staging = defaultStaging(c.opts.Office, c.opts.Name)
	}
	s := &skillSet{c: c, log: c.log, reg: skill.NewRegistry(c.log), staging: staging,
		read: skill.ReadOptions{InlineBudget: envInt(envSkillInlineBudget), MaxSize: envInt(envSkillMaxSize)},
		done: make(chan struct{}), wake: make(chan struct{}, 1),
		pending: map[string]*skillWork{}, servers: map[string]*serverSkills{}}
	s.pollUser()
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	c.skillState.Store(s)
	go s.run(ctx)
	return nil
}

// stopSkills stops the goroutine startSkills started and waits for it.
// Staged files stay. Safe to call more than once.
func (c *Computer) stopSkills() {
	s := c.skillState.Swap(nil)
	if s == nil {
		return
	}
	s.stop()
	<-s.done
}

// defaultStaging is a private folder for one Computer's staged skills
// under the user's cache folder.
func defaultStaging(office, name string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.TempDir(), "a2c-"+strconv.Itoa(os.Getuid()))
	}
	sum := sha256.Sum256([]byte(office + "\x00" + name))
	id := smcp.NormalizeBundleName(name)
	if id == "" {
		id = "computer"
	}
	return filepath.Join(base, "a2c", "skills-staging", id+"-"+hex.EncodeToString(sum[:6]))
}

func envInt(name string) int64 {
	n, err := strconv.ParseInt(os.Getenv(name), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// upstreamChanged is called when the upstream bundleID's tools or
// connection state change (mcphost.Options.OnChange).
func (c *Computer) upstreamChanged(bundleID string) {
	if s := c.skills(); s != nil {
		s.queue(bundleID, func(w *skillWork) { w.state = true })
	}
}

// skillResourcesChanged is called when an upstream reports that its
// resource list or one resource changed.
func (c *Computer) skillResourcesChanged(ch mcphost.ResourceChange) {
	s := c.skills()
	if s == nil {
		return
	}
	if ch.URI == "" {
		s.queue(ch.BundleID, func(w *skillWork) { w.list = true })
		return
	}
	if len(ch.URI) < len(skill.Scheme)+3 || ch.URI[:len(skill.Scheme)+3] != skill.Scheme+"://" {
		return // not a skill resource (a window, say)
	}
	s.queue(ch.BundleID, func(w *skillWork) {
		if w.uris == nil {
			w.uris = map[string]bool{}
		}
		w.uris[ch.URI] = true
	})
}

// queue records work for bundleID and wakes the run goroutine.
func (s *skillSet) queue(bundleID string, f func(*skillWork)) {
	s.mu.Lock()
	w := s.pending[bundleID]
	if w == nil {
		w = &skillWork{}
		s.pending[bundleID] = w
	}
	f(w)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the SKILL channel's one worker (see the file comment).
func (s *skillSet) run(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(SkillsPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if s.pollUser() {
				s.c.emit(smcp.EventUpdateSkills)
			}
		case <-s.wake:
			s.mu.Lock()
			work := s.pending
			s.pending = map[string]*skillWork{}
			s.mu.Unlock()
			changed := false
			for bundleID, w := range work {
				if ctx.Err() != nil {
					return
				}
				if s.syncServer(ctx, bundleID, w) {
					changed = true
				}
			}
			if changed {
				s.c.emit(smcp.EventUpdateSkills)
			}
		}
	}
}

// pollUser rescans the user folder when its fingerprint changed, and
// reports whether the registry changed.
func (s *skillSet) pollUser() bool {
	dir := s.c.opts.SkillsDir
	fp := ""
	if dir != "" {
		fp = skill.Fingerprint(dir)
	}
	if s.userScanned && fp == s.userFP {
		return false
	}
	first := !s.userScanned
	s.userFP, s.userScanned = fp, true
	changed := s.reg.Set(skill.SourceUser, skill.ScanUser(dir, s.log))
	if changed && !first {
		s.log.Info("skills: user folder changed", "dir", dir)
	}
	return changed
}

// syncServer brings the server bundleID's skills in step with w, and
// reports whether the registry changed: a server that is gone, stopped
// or not connected has its skills orphaned (hidden, files kept); one
// that (re)connected is listed and materialised anew; one that reported
// a change is re-listed, and the roots it named re-materialised.
func (s *skillSet) syncServer(ctx context.Context, bundleID string, w *skillWork) bool {
	c := s.c
	source := skill.MCPSourceName(bundleID)
	c.mu.RLock()
	var up *mcphost.Upstream
	sameHost := false
	if h := c.servers[bundleID]; h != nil {
		up = h.up
		sameHost = onThisHost(h.cfg)
	}
	c.mu.RUnlock()
	st := s.servers[bundleID]
	if st == nil {
		st = &serverSkills{src: skill.NewMCPSource(bundleID, s.staging, skill.Limits{}, nil, s.log)}
		s.servers[bundleID] = st
	}
	st.src.SameHost = sameHost
	ready := false
	if up != nil {
		state, _ := up.State()
		caps := up.Capabilities()
		ready = state == mcphost.Ready && caps != nil && caps.Resources != nil
	}
	if !ready {
		st.ready = false
		return s.reg.SetOrphan(source, true)
	}
	fresh := !st.ready || st.up != up
	if !fresh && !w.list && len(w.uris) == 0 {
		return false // a tool list change, say
	}
	force := map[string]bool{}
	for uri := range w.uris {
		if r, ok := st.src.Root(uri); ok {
			force[r.URI] = true
		} else {
			w.list = true // an unknown skill resource: list again
		}
	}
	sctx, cancel := context.WithTimeout(ctx, skillSyncTimeout)
	defer cancel()
	pkgs, _, err := st.src.Sync(sctx, up, force, fresh)
	if err != nil {
		s.log.Warn("skills: listing an MCP server's skills failed", "bundle_id", bundleID, "err", err)
		return false // tried again on the server's next change
	}
	st.up, st.ready = up, true
	for _, r := range st.src.Roots() {
		if err := up.Subscribe(sctx, r.URI); err != nil {
			s.log.Debug("skills: resources/subscribe failed", "bundle_id", bundleID, "uri", r.URI, "err", err)
		}
	}
	changed := s.reg.Set(source, pkgs)
	if s.reg.SetOrphan(source, false) {
		changed = true
	}
	return changed
}

// getSkills answers client:get_skills: the registry's visible skills in
// discovery order, without reading any SKILL.md.
func (c *Computer) getSkills(e *sio.Event, req smcp.GetSkillsReq) {
	var refs []smcp.A2CSkillRef
	if s := c.skills(); s != nil {
		refs = s.reg.Refs()
	}
	if !c.profile.SkillTags {
		for i := range refs {
			refs[i].Tags = nil
		}
	}
	answer(e, smcp.GetSkillsRet{Skills: refs, ReqID: req.ReqID})
}

// getSkill answers client:get_skill (see skill.Get); a resource served by
// handle is stored in the Computer's blob store for the asking Agent.
func (c *Computer) getSkill(e *sio.Event, req smcp.GetSkillReq) {
	s := c.skills()
	if s == nil {
		answer(e, skill.NotFound(req.Name))
		return
	}
	rel := ""
	if req.RelPath != nil {
		rel = *req.RelPath
	}
	ret, err := skill.Get(s.reg, req.Name, rel, s.read, func(data []byte, mime string) string {
		// The handle lives while the skill does: one whose package was
		// removed, orphaned or replaced reads as gone (4018).
		pkg, _ := s.reg.Lookup(req.Name)
		h, _ := c.blobs.PutLive(data, mime, req.Agent, func() bool {
			now, ok := s.reg.Lookup(req.Name)
			return ok && now.Root == pkg.Root && now.Digest == pkg.Digest
		})
		return h
	})
	if err != nil {
		answer(e, err)
		return
	}
	ret.ReqID = req.ReqID
	answer(e, ret)
}

// onThisHost reports whether the server of s runs on this host: a stdio
// child, an in-process server, or an HTTP server whose URL names a
// loopback address (a name is taken only when it is "localhost").
func onThisHost(s config.Server) bool {
	if s.HTTP == nil {
		return true
	}
	u, err := url.Parse(s.HTTP.URL)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// MarketSkillPrefix starts the source of a marketplace plugin's skills
// ("marketplace:<mp>").
const MarketSkillPrefix = "marketplace:"

// SetMarketSkills replaces the skills of the marketplace plugins, by
// source ("marketplace:<mp>"); a marketplace source not in skills loses
// its skills. It reports whether what Agents see changed, and then sends
// server:update_skills (if joined). The management plane calls it (see
// package market's Projector): the plugins' skills are a projection of
// the settings, never read by the Computer itself.
func (c *Computer) SetMarketSkills(skills map[string][]skill.Package) bool {
	s := c.skills()
	if s == nil {
		return false
	}
	changed := false
	for _, src := range s.reg.Sources() {
		if _, ok := skills[src]; !ok && strings.HasPrefix(src, MarketSkillPrefix) && len(s.reg.Packages(src)) > 0 {
			changed = s.reg.Set(src, nil) || changed
		}
	}
	for _, src := range slices.Sorted(maps.Keys(skills)) {
		if !strings.HasPrefix(src, MarketSkillPrefix) {
			continue
		}
		changed = s.reg.Set(src, skills[src]) || changed
	}
	if changed {
		c.emit(smcp.EventUpdateSkills)
	}
	return changed
}
