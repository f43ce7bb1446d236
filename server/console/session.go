package console

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Session and login limits.
const (
	// CookieName is the session cookie.
	CookieName = "a2c_console"
	// SessionTTL is how long a session lasts from its login.
	SessionTTL = 12 * time.Hour
	// MaxSessions bounds the sessions kept; past it a login ends the
	// session that would expire first.
	MaxSessions = 1024
	// MaxFailedLogins is how many wrong tokens one remote address (an
	// IPv6 address: its /64) may send per LoginWindow; past it its logins
	// get 429 until the window ends.
	MaxFailedLogins = 5
	// MaxFailedLoginsTotal is how many wrong tokens all addresses
	// together may send per LoginWindow; past it every login gets 429
	// until the window ends (a bound on guessing from many addresses).
	MaxFailedLoginsTotal = 100
	// LoginWindow is the window of MaxFailedLogins and
	// MaxFailedLoginsTotal.
	LoginWindow = time.Minute
	// maxTracked bounds the remote addresses whose failures are counted
	// one by one; past it the others share one count.
	maxTracked = 4096
	// overflow is the key of the count shared past maxTracked.
	overflow = "*"
)

// startTime is the modification time of the embedded files.
var startTime = time.Now()

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// sessions are the console's logins: random ids, kept here only.
type sessions struct {
	token [sha256.Size]byte // the hub token's hash: compared in constant time
	open  bool              // no token: no login needed
	now   func() time.Time

	mu       sync.Mutex
	byID     map[string]*session  // id -> session
	failures map[string]*failures // login key (see loginKey) -> failed logins
	all      *failures            // every address's failed logins
	maxAll   int                  // MaxFailedLoginsTotal (a field for tests)
}

type failures struct {
	n     int
	since time.Time
}

func newSessions(token string) *sessions {
	return &sessions{
		token:    sha256.Sum256([]byte(token)),
		open:     token == "",
		now:      time.Now,
		byID:     make(map[string]*session),
		failures: make(map[string]*failures),
		all:      &failures{},
		maxAll:   MaxFailedLoginsTotal,
	}
}

// session is one login.
type session struct {
	id   string
	exp  time.Time
	done chan struct{} // closed when the session ends: logout, expiry, eviction, Close
}

// valid reports whether r carries a live session (always, when open).
func (s *sessions) valid(r *http.Request) bool {
	_, ok := s.lookup(r)
	return ok
}

// lookup returns the live session r carries (nil and true when the
// console is open).
func (s *sessions) lookup(r *http.Request) (*session, bool) {
	if s.open {
		return nil, true
	}
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" || len(ck.Value) > 64 {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.byID[ck.Value]
	if se == nil || !s.aliveLocked(se) {
		return nil, false
	}
	return se, true
}

// alive reports whether se (nil: the open console's) has not ended; an
// expired session ends here.
func (s *sessions) alive(se *session) bool {
	if se == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.aliveLocked(se)
}

// until is the time left before se expires.
func (s *sessions) until(se *session) time.Duration {
	return se.exp.Sub(s.now())
}

func (s *sessions) aliveLocked(se *session) bool {
	if s.byID[se.id] != se {
		return false
	}
	if !s.now().Before(se.exp) {
		s.endLocked(se)
		return false
	}
	return true
}

// endLocked ends se: its streams and proxied answers stop. s.mu is held.
func (s *sessions) endLocked(se *session) {
	delete(s.byID, se.id)
	close(se.done)
}

// checkToken compares a presented token with the hub's in constant time.
func (s *sessions) checkToken(tok string) bool {
	h := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(h[:], s.token[:]) == 1
}

// live is key's count of failures in the current window, or nil; an
// expired one is dropped. s.mu is held.
func (s *sessions) live(key string, now time.Time) *failures {
	f := s.failures[key]
	if f != nil && now.Sub(f.since) >= LoginWindow {
		delete(s.failures, key)
		return nil
	}
	return f
}

// allLive is the count of every address's failures in the current
// window. s.mu is held.
func (s *sessions) allLive(now time.Time) *failures {
	if now.Sub(s.all.since) >= LoginWindow {
		s.all = &failures{since: now}
	}
	return s.all
}

// limitedLocked reports whether a login keyed key is refused now: every
// address has used up MaxFailedLoginsTotal, or key its MaxFailedLogins
// (an untracked key: the shared overflow count). s.mu is held.
func (s *sessions) limitedLocked(key string, now time.Time) bool {
	if s.allLive(now).n >= s.maxAll {
		return true
	}
	f := s.live(key, now)
	if f == nil {
		f = s.live(overflow, now)
	}
	return f != nil && f.n >= MaxFailedLogins
}

// limited reports whether a login keyed key (see loginKey) is refused
// now.
func (s *sessions) limited(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limitedLocked(key, s.now())
}

// attempt checks key's limits and counts one failed login against them
// in the same locked step, so that logins whose bodies arrive together
// cannot all pass the check before any of them is counted. It returns
// false when a limit is used up. A login whose token is right gives the
// attempt back with [sessions.release].
func (s *sessions) attempt(key string) (loginAttempt, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.limitedLocked(key, now) {
		return loginAttempt{}, false
	}
	f := s.live(key, now)
	if f == nil {
		if len(s.failures) >= maxTracked {
			for k := range s.failures {
				s.live(k, now) // drops the expired
			}
			if len(s.failures) >= maxTracked {
				// Full of live entries: count everyone unknown as one.
				key = overflow
			}
		}
		if f = s.live(key, now); f == nil {
			f = &failures{since: now}
			s.failures[key] = f
		}
	}
	f.n++
	s.all.n++
	return loginAttempt{key: f, all: s.all, last: s.all.n == s.maxAll}, true
}

// loginAttempt is one counted login: its key's count and the global
// one; last: it used up the global one.
type loginAttempt struct {
	key, all *failures
	last     bool
}

// release gives back an attempt whose token was right.
func (s *sessions) release(a loginAttempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range []*failures{a.key, a.all} {
		if f.n > 0 {
			f.n--
		}
	}
}

// failed counts a wrong token from host (for tests).
func (s *sessions) failed(host string) { s.attempt(host) }

// create opens a session and returns its id.
func (s *sessions) create() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.byID) >= MaxSessions {
		var oldest *session
		for _, se := range s.byID {
			if !now.Before(se.exp) {
				s.endLocked(se)
				continue
			}
			if oldest == nil || se.exp.Before(oldest.exp) {
				oldest = se
			}
		}
		if len(s.byID) >= MaxSessions {
			s.endLocked(oldest)
		}
	}
	s.byID[id] = &session{id: id, exp: now.Add(SessionTTL), done: make(chan struct{})}
	return id
}

// end ends the session r carries, if any.
func (s *sessions) end(r *http.Request) {
	if ck, err := r.Cookie(CookieName); err == nil {
		s.mu.Lock()
		if se := s.byID[ck.Value]; se != nil {
			s.endLocked(se)
		}
		s.mu.Unlock()
	}
}

func (s *sessions) clear() {
	s.mu.Lock()
	for _, se := range s.byID {
		s.endLocked(se)
	}
	s.mu.Unlock()
}

// count is the number of sessions kept (for tests).
func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// cookie is the session cookie carrying id (an empty id deletes it).
func cookie(r *http.Request, id string) *http.Cookie {
	ck := &http.Cookie{
		Name:     CookieName,
		Value:    id,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   r.TLS != nil,
		MaxAge:   int(SessionTTL / time.Second),
	}
	if id == "" {
		ck.MaxAge = -1
	}
	return ck
}

// wantsJSON reports whether a login or logout asks for a JSON answer
// (a script's fetch) rather than a redirect (a plain form).
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// login takes the token of the login form. A form gets 303 to / (the
// app), or to /?error=token (wrong token), /?error=limited (too many
// failures) or /?error=invalid; a request that accepts JSON gets 204, or
// 401, 429 or 400 in the console's error shape.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	s := c.sessions
	if s.open {
		c.loginAnswer(w, r, http.StatusNoContent, "")
		return
	}
	host := remoteHost(r)
	key := loginKey(host)
	// A limited address is refused before its body is read; the limit
	// itself is enforced by attempt, once the token is known.
	if s.limited(key) {
		c.limitedAnswer(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.loginAnswer(w, r, http.StatusBadRequest, "invalid login form")
		return
	}
	f, ok := s.attempt(key)
	if !ok {
		c.limitedAnswer(w, r)
		return
	}
	if !s.checkToken(r.PostForm.Get("token")) {
		c.log.Warn("console: failed login", "remote", host)
		if f.last {
			c.log.Warn("console: too many failed logins from all addresses; every login is refused until the minute ends", "limit", s.maxAll)
		}
		c.loginAnswer(w, r, http.StatusUnauthorized, "wrong token")
		return
	}
	s.release(f)
	http.SetCookie(w, cookie(r, s.create()))
	c.loginAnswer(w, r, http.StatusNoContent, "")
}

// limitedAnswer refuses a login from an address past its limit.
func (c *Console) limitedAnswer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "60")
	c.loginAnswer(w, r, http.StatusTooManyRequests, "too many failed logins; try again in a minute")
}

func (c *Console) loginAnswer(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if wantsJSON(r) {
		if status == http.StatusNoContent {
			w.WriteHeader(status)
			return
		}
		writeError(w, status, msg)
		return
	}
	to := "/"
	switch status {
	case http.StatusNoContent:
	case http.StatusTooManyRequests:
		to = "/?error=limited"
	case http.StatusUnauthorized:
		to = "/?error=token"
	default:
		to = "/?error=invalid"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// logout ends the session and deletes the cookie.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	c.sessions.end(r)
	http.SetCookie(w, cookie(r, ""))
	c.loginAnswer(w, r, http.StatusNoContent, "")
}

// loginKey is what the login limits count by: an IPv4 address, or an
// IPv6 address's /64 (one host commonly holds a whole /64).
func loginKey(host string) string {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// remoteHost is the request's remote address without its port.
func remoteHost(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// sameOrigin reports whether a state-changing request comes from the
// hub's own pages: it carries an Origin (else a Referer), and that is an
// origin the hub's Host and Origin rule allows (package origin: the
// host the request was sent to, any scheme, or one given with
// --allowed-origin). The hub checked Host and Origin before the console
// saw the request; what is left here is that one of the two is present.
func (c *Console) sameOrigin(r *http.Request) bool {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	return src != "" && c.srv.Origins().SourceAllowed(r, src)
}
