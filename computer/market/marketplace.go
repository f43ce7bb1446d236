package market

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// Error is a management operation's failure as the CLI reports it: the
// SDKs' message and the exit code (1: the user's mistake, 2: a clone or
// refresh failed, 3: internal).
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return e.Message }

func userErr(format string, a ...any) *Error {
	return &Error{Code: 1, Message: fmt.Sprintf(format, a...)}
}

// Manager performs the management operations on the files of Paths.
type Manager struct {
	Paths settings.Paths
	Log   *slog.Logger
	// Now is the clock of the records (time.Now when nil).
	Now func() time.Time
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// timestamp is a record's time: UTC, to the second, RFC 3339 with Z.
func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// AddOptions are `marketplace add`'s.
type AddOptions struct {
	URL        string
	Name       string // --name ("": derived from URL)
	Trust      bool   // --trust
	AutoUpdate bool   // --auto-update
	NoClone    bool   // --no-clone: record only
	// Confirm asks the user whether to trust the marketplace; nil when
	// there is no terminal to ask on.
	Confirm func(question string) bool
}

// AddResult is `marketplace add --json`'s output.
type AddResult struct {
	Added  string `json:"added"`
	URL    string `json:"url"`
	Skills int    `json:"skills"`
}

// lock serializes the management operations of every process on this
// SKILL home (the CLI's verbs, a Computer's boot): each reads files,
// then writes them, and two at once would lose one's update. It waits
// for up to 3 minutes (a clone's 120 s and more).
func (m *Manager) lock() (func(), error) {
	if err := os.MkdirAll(m.Paths.SkillHome, 0o755); err != nil {
		return nil, &Error{Code: 3, Message: fmt.Sprintf("the SKILL home %s cannot be made", m.Paths.SkillHome)}
	}
	unlock, err := settings.LockWait(filepath.Join(m.Paths.SkillHome, "manage"), 3*time.Minute)
	if err != nil {
		return nil, &Error{Code: 3, Message: "another management operation holds the SKILL home; try again"}
	}
	return unlock, nil
}

// ownerRepo is GitHub's owner/repo shorthand.
var ownerRepo = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// ExpandURL turns the owner/repo shorthand into GitHub's https remote;
// any other value is returned as it is.
func ExpandURL(u string) string {
	if ownerRepo.MatchString(u) && !strings.HasPrefix(u, ".") {
		return "https://github.com/" + strings.TrimSuffix(u, ".git") + ".git"
	}
	return u
}

// nonName are the runs a derived marketplace name turns into "-".
var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// DeriveName is the marketplace name a remote gives: its last path
// element without ".git", lowercased, each run of other characters than
// [a-z0-9] made one "-". It is "" when that is not a valid name.
func DeriveName(u string) string {
	tail := strings.TrimRight(u, "/")
	if i := strings.LastIndexAny(tail, "/:"); i >= 0 {
		tail = tail[i+1:]
	}
	tail = strings.TrimSuffix(strings.ToLower(tail), ".git")
	name := strings.Trim(nonName.ReplaceAllString(tail, "-"), "-")
	if !settings.ValidName(name) {
		return ""
	}
	return name
}

// knownPath is the SKILL home's known_marketplaces.json.
func (m *Manager) knownPath() string {
	return filepath.Join(m.Paths.SkillHome, settings.KnownMarketplacesFile)
}

// Known reads known_marketplaces.json (empty when missing or set aside).
func (m *Manager) Known() (*settings.KnownMarketplaces, error) {
	k := &settings.KnownMarketplaces{}
	if _, err := settings.ReadDerived(m.knownPath(), k, m.Log); err != nil {
		return nil, err
	}
	if k.Marketplaces == nil {
		k.Marketplaces = map[string]settings.Marketplace{}
	}
	for name := range k.Marketplaces {
		if !settings.ValidName(name) { // never a path made of a hostile file's key
			delete(k.Marketplaces, name)
			if m.Log != nil {
				m.Log.Warn("market: known_marketplaces.json: a record with an invalid name left out", "name", name)
			}
		}
	}
	return k, nil
}

// cloneDir is marketplace name's clone in the SKILL home.
func (m *Manager) cloneDir(name string) string {
	return filepath.Join(m.Paths.SkillHome, "marketplace", name)
}

// Add adds a marketplace: it checks the remote and the name, asks for
// trust (or takes --trust), records the trust in the user's settings,
// clones the catalog shallowly into the SKILL home and records it in
// known_marketplaces.json. Installing its plugins is another step.
func (m *Manager) Add(ctx context.Context, o AddOptions) (_ AddResult, err error) {
	unlock, err := m.lock()
	if err != nil {
		return AddResult{}, err
	}
	defer unlock()
	url := ExpandURL(o.URL)
	if !settings.ValidGitURL(url) {
		return AddResult{}, userErr("invalid marketplace url '%s' (a git remote: ssh://, git://, http(s)://, file:///path, user@host:path, or owner/repo)", o.URL)
	}
	name := o.Name
	if name == "" {
		if name = DeriveName(url); name == "" {
			return AddResult{}, userErr("cannot derive a valid marketplace name from %s; pass --name", url)
		}
	} else if !settings.ValidName(name) {
		return AddResult{}, userErr("invalid marketplace name '%s' (1 to 64 of [a-z0-9] in words joined by '-')", name)
	}
	known, err := m.Known()
	if err != nil {
		return AddResult{}, &Error{Code: 3, Message: err.Error()}
	}
	if _, ok := known.Marketplaces[name]; ok {
		return AddResult{}, userErr("marketplace name conflict: '%s' already exists", name)
	}
	merged, err := settings.Load(m.Paths)
	if err != nil {
		return AddResult{}, &Error{Code: 3, Message: err.Error()}
	}
	if blockedMarketplace(merged, name, url) {
		return AddResult{}, userErr("marketplace '%s' is blocked by blockedMarketplaces", name)
	}
	if !trustedURL(merged, name, url) && !o.Trust {
		q := fmt.Sprintf("Trust marketplace '%s' (%s)? Its plugins run programs on this machine.", name, url)
		if o.Confirm == nil {
			return AddResult{}, userErr("untrusted marketplace '%s' (%s); pass --trust to confirm non-interactively", name, url)
		}
		if !o.Confirm(q) {
			return AddResult{}, userErr("marketplace '%s' not trusted; nothing added", name)
		}
	}
	// The intent first: the trust is the user's, in the user's settings
	// (taken back if the add fails).
	userTrusted := stringList(merged.Layer(settings.User).Values["trustedMarketplaces"])
	if !slices.Contains(userTrusted, url) {
		if err := settings.Set(m.Paths, settings.User, "trustedMarketplaces", append(slices.Clone(userTrusted), url)); err != nil {
			return AddResult{}, &Error{Code: 3, Message: err.Error()}
		}
		defer func() {
			if err != nil {
				if uerr := settings.Set(m.Paths, settings.User, "trustedMarketplaces", userTrusted); uerr != nil && m.Log != nil {
					m.Log.Warn("market: taking back a failed add's trust", "marketplace", name, "err", uerr)
				}
			}
		}()
	}
	dir := m.cloneDir(name)
	rec := settings.Marketplace{Source: settings.Source{Type: "git", URL: url}, InstallLocation: dir, AutoUpdate: o.AutoUpdate}
	skills := 0
	if !o.NoClone {
		if rec.CommitSHA, err = m.clone(ctx, url, dir); err != nil {
			return AddResult{}, err
		}
		cat, err := ReadCatalog(dir)
		if err != nil {
			_ = m.removeTree(dir)
			return AddResult{}, userErr("'%s' is not a marketplace: %v", url, err)
		}
		rec.LastUpdated = timestamp(m.now())
		skills = cat.SkillCount(dir)
	}
	known.Marketplaces[name] = rec
	if err := settings.WriteDerived(m.knownPath(), known); err != nil {
		return AddResult{}, &Error{Code: 3, Message: err.Error()}
	}
	return AddResult{Added: name, URL: url, Skills: skills}, nil
}

// clone makes a shallow clone of url at dir (a leftover there is removed
// first; dir is always inside the SKILL home) and returns its commit. A
// failure removes what it made and is logged; its error is the SDKs'
// message, exit 2.
func (m *Manager) clone(ctx context.Context, url, dir string) (string, error) {
	if err := m.removeTree(dir); err != nil {
		return "", &Error{Code: 3, Message: err.Error()}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", &Error{Code: 3, Message: err.Error()}
	}
	_, err := git(ctx, "", "clone", "--quiet", "--depth", "1", "--", url, dir)
	var sha string
	if err == nil {
		sha, err = git(ctx, dir, "rev-parse", "HEAD")
	}
	if err == nil && !validSHA(sha) {
		err = errors.New("git rev-parse HEAD: not a commit")
	}
	if err != nil {
		_ = m.removeTree(dir)
		if m.Log != nil {
			m.Log.Warn("market: clone failed", "url", url, "err", err)
		}
		return "", &Error{Code: 2, Message: fmt.Sprintf("clone/refresh failed for '%s' (see logs)", url)}
	}
	return sha, nil
}

// validSHA reports whether s is a full commit id (40 hex digits).
func validSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// stringList is a decoded JSON list's strings.
func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Listed is a `marketplace list --json` row; Info adds the clone's
// place and the plugins installed from it (`marketplace info`).
type Listed struct {
	Name             string   `json:"name"`
	URL              string   `json:"url"`
	Trusted          bool     `json:"trusted"`
	AutoUpdate       bool     `json:"autoUpdate"`
	LastUpdated      string   `json:"lastUpdated"`
	CommitSHA        string   `json:"commitSha"`
	InstallLocation  string   `json:"installLocation,omitempty"`
	InstalledPlugins []string `json:"installedPlugins,omitempty"`
}

// List lists the known marketplaces by name.
func (m *Manager) List() ([]Listed, error) {
	known, err := m.Known()
	if err != nil {
		return nil, &Error{Code: 3, Message: err.Error()}
	}
	merged, err := settings.Load(m.Paths)
	if err != nil {
		return nil, &Error{Code: 3, Message: err.Error()}
	}
	trusted := stringList(merged.Values["trustedMarketplaces"])
	out := []Listed{}
	for _, name := range sortedNames(known.Marketplaces) {
		r := known.Marketplaces[name]
		out = append(out, Listed{Name: name, URL: r.Source.URL, Trusted: slices.Contains(trusted, r.Source.URL) || slices.Contains(trusted, name),
			AutoUpdate: r.AutoUpdate, LastUpdated: r.LastUpdated, CommitSHA: r.CommitSHA})
	}
	return out, nil
}

// Info is marketplace name's row with its clone's place and the plugins
// installed from it.
func (m *Manager) Info(name string) (Listed, error) {
	list, err := m.List()
	if err != nil {
		return Listed{}, err
	}
	for _, l := range list {
		if l.Name != name {
			continue
		}
		known, _ := m.Known()
		l.InstallLocation = known.Marketplaces[name].InstallLocation
		l.InstalledPlugins = []string{}
		plugins := &settings.InstalledPlugins{}
		if _, err := settings.ReadDerived(filepath.Join(m.Paths.SkillHome, settings.InstalledPluginsFile), plugins, m.Log); err == nil {
			for _, id := range sortedNames(plugins.Plugins) {
				if _, mp, err := settings.ParsePluginID(id); err == nil && mp == name {
					l.InstalledPlugins = append(l.InstalledPlugins, id)
				}
			}
		}
		return l, nil
	}
	return Listed{}, userErr("unknown marketplace: '%s'", name)
}

// Refreshed is a `marketplace refresh --json` row: status updated,
// unchanged, missing (no clone to pull: it is cloned again) or failed.
type Refreshed struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Skills int    `json:"skills"`
}

// Refresh pulls marketplace name's clone (all of them for "" or "all"),
// or clones it again when the pull cannot fast-forward or the clone is
// gone, and rescans it. The record's commit and time move only when the
// commit did.
func (m *Manager) Refresh(ctx context.Context, name string) ([]Refreshed, error) {
	unlock, err := m.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return m.refresh(ctx, name)
}

// refresh is Refresh under the lock.
func (m *Manager) refresh(ctx context.Context, name string) ([]Refreshed, error) {
	known, err := m.Known()
	if err != nil {
		return nil, &Error{Code: 3, Message: err.Error()}
	}
	names := sortedNames(known.Marketplaces)
	if name != "" && name != "all" {
		if _, ok := known.Marketplaces[name]; !ok {
			return nil, userErr("unknown marketplace: '%s'", name)
		}
		names = []string{name}
	}
	out := []Refreshed{}
	failed := false
	for _, n := range names {
		r := known.Marketplaces[n]
		row := Refreshed{Name: n, Status: "unchanged"}
		dir := m.cloneDir(n)
		sha := ""
		if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
			row.Status = "missing"
		} else if _, err := git(ctx, dir, "pull", "--quiet", "--ff-only"); err == nil {
			sha, _ = git(ctx, dir, "rev-parse", "HEAD")
		} else if m.Log != nil {
			m.Log.Warn("market: pull failed; cloning again", "marketplace", n, "err", err)
		}
		if !validSHA(sha) { // missing, or the pull failed: clone again
			if sha, err = m.clone(ctx, r.Source.URL, dir); err != nil {
				out = append(out, Refreshed{Name: n, Status: "failed"})
				failed = true
				continue
			}
		}
		if sha != r.CommitSHA {
			if row.Status == "unchanged" {
				row.Status = "updated"
			}
			r.CommitSHA, r.LastUpdated = sha, timestamp(m.now())
			known.Marketplaces[n] = r
		}
		if cat, err := ReadCatalog(dir); err == nil {
			row.Skills = cat.SkillCount(dir)
		}
		out = append(out, row)
	}
	if err := settings.WriteDerived(m.knownPath(), known); err != nil {
		return out, &Error{Code: 3, Message: err.Error()}
	}
	if failed {
		return out, &Error{Code: 2, Message: "clone/refresh failed for some marketplaces (see logs)"}
	}
	return out, nil
}

// Set sets a marketplace's option: only "auto-update" (a boolean).
func (m *Manager) Set(name, key, value string) error {
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if key != "auto-update" {
		return userErr("unknown key '%s' (only 'auto-update' supported)", key)
	}
	var on bool
	switch value {
	case "true":
		on = true
	case "false":
	default:
		return userErr("auto-update must be true or false, not '%s'", value)
	}
	known, err := m.Known()
	if err != nil {
		return &Error{Code: 3, Message: err.Error()}
	}
	r, ok := known.Marketplaces[name]
	if !ok {
		return userErr("unknown marketplace: '%s'", name)
	}
	r.AutoUpdate = on
	known.Marketplaces[name] = r
	if err := settings.WriteDerived(m.knownPath(), known); err != nil {
		return &Error{Code: 3, Message: err.Error()}
	}
	return nil
}

// sortedNames are m's keys in order.
func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
