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
func (m *Manager) Add(ctx context.Context, o AddOptions) (AddResult, error) {
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
	blocked, trusted := stringList(merged.Values["blockedMarketplaces"]), stringList(merged.Values["trustedMarketplaces"])
	if slices.Contains(blocked, url) || slices.Contains(blocked, name) {
		return AddResult{}, userErr("marketplace '%s' is blocked by blockedMarketplaces", name)
	}
	if !slices.Contains(trusted, url) && !o.Trust {
		q := fmt.Sprintf("Trust marketplace '%s' (%s)? Its plugins run programs on this machine.", name, url)
		if o.Confirm == nil {
			return AddResult{}, userErr("untrusted marketplace '%s' (%s); pass --trust to confirm non-interactively", name, url)
		}
		if !o.Confirm(q) {
			return AddResult{}, userErr("marketplace '%s' not trusted; nothing added", name)
		}
	}
	// The intent first: the trust is the user's, in the user's settings.
	userTrusted := stringList(merged.Layer(settings.User).Values["trustedMarketplaces"])
	if !slices.Contains(userTrusted, url) {
		if err := settings.Set(m.Paths, settings.User, "trustedMarketplaces", append(userTrusted, url)); err != nil {
			return AddResult{}, &Error{Code: 3, Message: err.Error()}
		}
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
			_ = os.RemoveAll(dir)
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
	if err := os.RemoveAll(dir); err != nil {
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
		_ = os.RemoveAll(dir)
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
