package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// FirefoxBrowser is Debian's firefox-esr started by [Firefox]: headless,
// a fresh profile in a temporary folder, WebDriver BiDi (and nothing
// else of the remote agent) on a random 127.0.0.1 port. It is stopped,
// with every process of its group, at the end of the test that started
// it.
type FirefoxBrowser struct {
	port int
	proc *daemon
}

// FirefoxOptions tune [Firefox].
type FirefoxOptions struct {
	// Prefs are written to the profile's user.js after the defaults
	// (a name to a bool, an int or a string).
	Prefs map[string]any
	// Width and Height are the headless window's size (1280x800 when 0).
	Width, Height int
}

// firefoxPrefs keep a test's Firefox to itself: BiDi only, no first-run
// pages, no telemetry, updates, experiments or safe-browsing lists, and
// every request for another host sent to a proxy that does not exist
// (127.0.0.1 itself is never proxied), so nothing leaves the machine.
var firefoxPrefs = map[string]any{
	"remote.active-protocols":                                     1, // WebDriver BiDi only
	"browser.shell.checkDefaultBrowser":                           false,
	"browser.startup.page":                                        0,
	"browser.startup.homepage":                                    "about:blank",
	"browser.startup.homepage_override.mstone":                    "ignore",
	"startup.homepage_welcome_url":                                "about:blank",
	"startup.homepage_welcome_url.additional":                     "",
	"browser.aboutwelcome.enabled":                                false,
	"browser.newtabpage.enabled":                                  false,
	"browser.sessionstore.resume_from_crash":                      false,
	"toolkit.startup.max_resumed_crashes":                         -1,
	"browser.tabs.warnOnClose":                                    false,
	"browser.warnOnQuit":                                          false,
	"datareporting.policy.dataSubmissionEnabled":                  false,
	"datareporting.healthreport.uploadEnabled":                    false,
	"toolkit.telemetry.enabled":                                   false,
	"toolkit.telemetry.unified":                                   false,
	"toolkit.telemetry.reportingpolicy.firstRun":                  false,
	"app.update.disabledForTesting":                               true,
	"app.update.auto":                                             false,
	"app.normandy.enabled":                                        false,
	"app.shield.optoutstudies.enabled":                            false,
	"messaging-system.rsexperimentloader.enabled":                 false,
	"extensions.update.enabled":                                   false,
	"extensions.getAddons.cache.enabled":                          false,
	"extensions.blocklist.enabled":                                false,
	"browser.search.update":                                       false,
	"browser.region.update.enabled":                               false,
	"browser.region.network.url":                                  "",
	"media.gmp-manager.updateEnabled":                             false,
	"browser.safebrowsing.malware.enabled":                        false,
	"browser.safebrowsing.phishing.enabled":                       false,
	"browser.safebrowsing.downloads.enabled":                      false,
	"browser.safebrowsing.blockedURIs.enabled":                    false,
	"network.captive-portal-service.enabled":                      false,
	"network.connectivity-service.enabled":                        false,
	"network.trr.mode":                                            5, // no DNS over HTTPS
	"network.proxy.type":                                          1,
	"network.proxy.http":                                          "127.0.0.1",
	"network.proxy.http_port":                                     9,
	"network.proxy.share_proxy_settings":                          true,
	"network.proxy.allow_hijacking_localhost":                     false,
	"signon.rememberSignons":                                      false,
	"focusmanager.testmode":                                       true, // focus works without a focused window
	"layout.css.devPixelsPerPx":                                   "1.0",
	"services.settings.server":                                    "http://127.0.0.1:9/",
	"browser.contentblocking.report.lockwise.enabled":             false,
	"browser.newtabpage.activity-stream.feeds.telemetry":          false,
	"browser.newtabpage.activity-stream.telemetry":                false,
	"browser.ping-centre.telemetry":                               false,
	"browser.discovery.enabled":                                   false,
	"browser.urlbar.suggest.searches":                             false,
	"network.dns.disablePrefetch":                                 true,
	"network.prefetch-next":                                       false,
	"network.http.speculative-parallel-limit":                     0,
	"browser.topsites.contile.enabled":                            false,
	"browser.newtabpage.activity-stream.feeds.topsites":           false,
	"browser.newtabpage.activity-stream.showSponsored":            false,
	"browser.newtabpage.activity-stream.feeds.section.topstories": false,
}

var firefoxListenRE = regexp.MustCompile(`WebDriver BiDi listening on ws://127\.0\.0\.1:(\d+)`)

// Firefox starts firefox-esr headless with a fresh profile and WebDriver
// BiDi on port 0 (Firefox picks a free one and says which on its
// standard error), and waits up to 30 s for that line. A missing
// firefox-esr skips the test, or fails it under [RequirePeers].
func Firefox(t testing.TB, o FirefoxOptions) *FirefoxBrowser {
	t.Helper()
	bin, err := exec.LookPath("firefox-esr")
	if err != nil {
		MissingPeer(t, "firefox-esr (Debian package firefox-esr)")
	}
	dir := t.TempDir()
	profile := filepath.Join(dir, "profile")
	if err := os.MkdirAll(profile, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(profile, "user.js"), []byte(firefoxUserJS(o.Prefs)), 0o600); err != nil {
		t.Fatal(err)
	}
	w, h := o.Width, o.Height
	if w == 0 || h == 0 {
		w, h = 1280, 800
	}
	cmd := exec.Command(bin, "--headless", "--no-remote", "--profile", profile, "--remote-debugging-port", "0", "about:blank")
	// HOME, the XDG folders and TMPDIR keep what Firefox writes outside
	// its profile (~/.cache/mozilla, temporary files) in the test's
	// folder, which is removed.
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CACHE_HOME="+filepath.Join(dir, "cache"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "TMPDIR="+dir, "DISPLAY=", "DBUS_SESSION_BUS_ADDRESS=disabled:",
		"MOZ_CRASHREPORTER_DISABLE=1", "MOZ_HEADLESS_WIDTH="+strconv.Itoa(w), "MOZ_HEADLESS_HEIGHT="+strconv.Itoa(h))
	d, err := startDaemon("firefox", cmd, filepath.Join(dir, "firefox.log"))
	if err != nil {
		t.Fatal(err)
	}
	b := &FirefoxBrowser{proc: d}
	t.Cleanup(b.Stop)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := firefoxListenRE.FindStringSubmatch(d.logs()); m != nil {
			b.port, _ = strconv.Atoi(m[1])
			return b
		}
		if d.done() {
			t.Fatalf("firefox exited before it listened: %v\n%s", d.err(), d.logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("firefox did not open WebDriver BiDi within 30 s\n%s", d.logs())
		}
	}
}

// firefoxUserJS is the profile's user.js: the defaults, then extra.
func firefoxUserJS(extra map[string]any) string {
	var b strings.Builder
	write := func(m map[string]any) {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			v, _ := json.Marshal(m[n])
			fmt.Fprintf(&b, "user_pref(%q, %s);\n", n, v)
		}
	}
	write(firefoxPrefs)
	write(extra)
	return b.String()
}

// Port is the WebDriver BiDi port.
func (b *FirefoxBrowser) Port() int { return b.port }

// URL is the WebDriver BiDi endpoint, ws://127.0.0.1:PORT (a session is
// at URL()+"/session").
func (b *FirefoxBrowser) URL() string { return "ws://127.0.0.1:" + strconv.Itoa(b.port) }

// Logs is what Firefox wrote to its standard output and error.
func (b *FirefoxBrowser) Logs() string { return b.proc.logs() }

// Stop ends the browser (SIGTERM, then SIGKILL to its whole process group
// after 5 s) and waits (5 s at most) until no process of its group is
// left. A browser that crashed before is not an error here.
func (b *FirefoxBrowser) Stop() {
	_ = b.proc.stop(5 * time.Second)
	pgid := b.proc.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			return
		}
	}
}

// Session connects to the browser's WebDriver BiDi endpoint and starts a
// session (session.new). The connection closes at the end of the test.
func (b *FirefoxBrowser) Session(t testing.TB) *BiDi {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conn, _, err := d.Dial(b.URL()+"/session", nil)
	if err != nil {
		t.Fatalf("WebDriver BiDi: %v", err)
	}
	conn.SetReadLimit(64 << 20) // screenshots
	c := &BiDi{conn: conn, pending: map[int64]chan bidiAnswer{}, done: make(chan struct{})}
	go c.read()
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Call(ctx, "session.new", map[string]any{"capabilities": map[string]any{}}, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// BiDi is a minimal WebDriver BiDi client: commands and their answers,
// events to the handlers given to OnEvent.
type BiDi struct {
	conn *websocket.Conn
	wmu  sync.Mutex // one writer at a time

	mu       sync.Mutex
	next     int64
	pending  map[int64]chan bidiAnswer
	handlers []func(BiDiEvent)
	err      error // why the connection ended
	done     chan struct{}
}

// BiDiEvent is one event of the browser (log.entryAdded, ...).
type BiDiEvent struct {
	Method string
	Params json.RawMessage
}

// BiDiError is a command's error answer.
type BiDiError struct {
	Method  string // the command
	Code    string // the error code ("no such frame", ...)
	Message string
}

func (e *BiDiError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Method, e.Code, e.Message)
}

type bidiAnswer struct {
	result json.RawMessage
	err    error
}

type bidiMessage struct {
	Type    string          `json:"type"`
	ID      *int64          `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
}

// read owns the connection's reads until it fails (Close makes it fail).
func (c *BiDi) read() {
	defer close(c.done)
	for {
		var m bidiMessage
		if err := c.conn.ReadJSON(&m); err != nil {
			c.mu.Lock()
			c.err = fmt.Errorf("WebDriver BiDi connection: %w", err)
			for id, ch := range c.pending {
				ch <- bidiAnswer{err: c.err}
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		if m.Type == "event" {
			c.mu.Lock()
			hs := c.handlers
			c.mu.Unlock()
			for _, h := range hs {
				h(BiDiEvent{Method: m.Method, Params: m.Params})
			}
			continue
		}
		if m.ID == nil {
			continue
		}
		c.mu.Lock()
		ch := c.pending[*m.ID]
		delete(c.pending, *m.ID)
		c.mu.Unlock()
		if ch == nil {
			continue
		}
		if m.Type == "error" {
			ch <- bidiAnswer{err: &BiDiError{Code: m.Error, Message: m.Message}}
		} else {
			ch <- bidiAnswer{result: m.Result}
		}
	}
}

// OnEvent adds a handler for every event. Handlers run on the reader: they
// must return quickly and must not call Call.
func (c *BiDi) OnEvent(f func(BiDiEvent)) {
	c.mu.Lock()
	c.handlers = append(c.handlers, f)
	c.mu.Unlock()
}

// Call sends a command and waits for its answer (or ctx), decoding the
// result into result unless it is nil.
func (c *BiDi) Call(ctx context.Context, method string, params, result any) error {
	if params == nil {
		params = map[string]any{}
	}
	ch := make(chan bidiAnswer, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	c.wmu.Lock()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.conn.SetWriteDeadline(dl)
	} else {
		_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	}
	err := c.conn.WriteJSON(map[string]any{"id": id, "method": method, "params": params})
	c.wmu.Unlock()
	if err != nil {
		forget()
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case a := <-ch:
		if a.err != nil {
			if be, ok := a.err.(*BiDiError); ok {
				be.Method = method
			}
			return a.err
		}
		if result != nil {
			if err := json.Unmarshal(a.result, result); err != nil {
				return fmt.Errorf("%s: the answer %s: %w", method, a.result, err)
			}
		}
		return nil
	case <-ctx.Done():
		forget()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Close closes the connection (which ends the session) and waits for the
// reader to stop.
func (c *BiDi) Close() error {
	c.wmu.Lock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_ = c.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	c.wmu.Unlock()
	err := c.conn.Close()
	<-c.done
	return err
}
