package aiod

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// The launch suite runs the real aiod with --browser and --desktop: the
// daemon starts Debian's Chromium, Xvfb, openbox and its own
// computer-use worker, restarts them when they die, and leaves none of
// their processes behind when it stops, with and without isolation.

// lnNeed skips (or fails, under A2C_REQUIRE_PEERS) without the programs.
func lnNeed(t *testing.T, progs ...string) {
	t.Helper()
	for _, p := range progs {
		if _, err := exec.LookPath(p); err != nil {
			harness.MissingPeer(t, p)
		}
	}
}

// lnDaemon is an aiod started by lnStart.
type lnDaemon struct {
	*harness.Proc
	a     *aio
	cdp   string // the DevTools port
	state string // AIO_STATE_DIR
}

// lnStart runs aiod with args on a random port, its DevTools port and
// state folder fresh, and, at cleanup, checks that no process of the
// daemon's programs outlives it: every process whose process group was
// led by a child of the daemon (Chromium and its helpers, Xvfb, openbox,
// the worker) must be gone once the daemon has exited.
func lnStart(t *testing.T, env []string, args ...string) *lnDaemon {
	t.Helper()
	d := &lnDaemon{cdp: freePort(t), state: t.TempDir()}
	env = append([]string{"BROWSER_REMOTE_DEBUGGING_PORT=" + d.cdp, "AIO_STATE_DIR=" + d.state}, env...)
	d.Proc = startAiod(t, env, args...)
	d.a = &aio{t: t, base: d.URL}
	pid := d.Cmd().Process.Pid
	t.Cleanup(func() {
		groups := lnGroupsOf(pid)
		var members []int
		for _, g := range groups {
			members = append(members, lnGroup(g)...)
		}
		d.Stop(t)
		waitUntil(t, 10*time.Second, fmt.Sprintf("processes of the daemon's programs (groups %v) outlived it", groups), func() bool {
			return !slices.ContainsFunc(members, isoAlive)
		})
	})
	return d
}

// lnStat is a process's parent and process group (from /proc/PID/stat).
func lnStat(pid int) (ppid, pgid int, comm string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, "", false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < 0 {
		return 0, 0, "", false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 3 {
		return 0, 0, "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	pgid, _ = strconv.Atoi(f[2])
	return ppid, pgid, s[open+1 : end], true
}

// lnProcs lists the live host PIDs.
func lnProcs() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && isoAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// lnGroupsOf is the process groups led by children of parent.
func lnGroupsOf(parent int) []int {
	var out []int
	for _, pid := range lnProcs() {
		if ppid, pgid, _, ok := lnStat(pid); ok && ppid == parent && pgid == pid {
			out = append(out, pid)
		}
	}
	return out
}

// lnGroup is the live members of process group g.
func lnGroup(g int) []int {
	var out []int
	for _, pid := range lnProcs() {
		if _, pgid, _, ok := lnStat(pid); ok && pgid == g {
			out = append(out, pid)
		}
	}
	return out
}

// lnChild is the daemon's child whose command name is comm (a process
// group leader the launcher started), or 0.
func lnChild(daemon int, comm string) int {
	for _, g := range lnGroupsOf(daemon) {
		if _, _, c, _ := lnStat(g); c == comm {
			return g
		}
	}
	return 0
}

// lnCmdline is a process's arguments.
func lnCmdline(pid int) []string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// lnCDPViaDaemon reports whether the daemon's /cdp/json/version answers
// (with its key, when the test set one) naming a WebSocket under /cdp.
func (d *lnDaemon) lnCDPViaDaemon() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/cdp/json/version", nil)
	if d.a.key != "" {
		req.Header.Set("X-Api-Key", d.a.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var v map[string]string
	return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&v) == nil && strings.Contains(v["webSocketDebuggerUrl"], "/cdp/devtools/browser/")
}

// lnCDPAnswers reports whether /json/version answers on the host's
// 127.0.0.1:port.
func lnCDPAnswers(port string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+port+"/json/version", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var v map[string]string
	return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&v) == nil && v["webSocketDebuggerUrl"] != ""
}

// lnBrowserCaps is capabilities.browser, probed afresh.
func (d *lnDaemon) lnBrowserCaps(t *testing.T) map[string]any {
	t.Helper()
	// The probe has 300 ms (as the published daemon's); a loaded machine
	// may miss one, so a few fresh probes are allowed before the answer
	// counts.
	var b map[string]any
	for range 5 {
		code, e := d.a.call("GET", "/v1/capabilities", "/v1/capabilities?refresh=true", nil)
		if code != 200 {
			t.Fatalf("capabilities: %d %s", code, e.raw)
		}
		b, _ = e.obj()["browser"].(map[string]any)
		if b["status"] == "ready" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return b
}

// TestAiodLaunchBrowser: aiod --browser runs Chromium headless with
// DevTools over its pipe (no port) and a profile under the state folder,
// served at the daemon's /cdp; the browser capability is ready; a
// Chromium killed is started again (a new process that answers CDP); SIGTERM to the daemon leaves no process of
// Chromium's group behind (checked at cleanup).
func TestAiodLaunchBrowser(t *testing.T) {
	lnNeed(t, "chromium")
	d := lnStart(t, nil, "--browser")
	if b := d.lnBrowserCaps(t); b["status"] != "ready" || b["cdp"] != true {
		t.Fatalf("capabilities.browser = %v, want ready with cdp", b)
	}
	if !d.lnCDPViaDaemon() {
		t.Fatalf("no DevTools answer at the daemon's /cdp")
	}
	pid := lnChild(d.Cmd().Process.Pid, "chromium")
	if pid == 0 {
		t.Fatalf("no chromium child of the daemon; logs:\n%s", d.Logs())
	}
	args := lnCmdline(pid)
	for _, want := range []string{"--headless=new", "--remote-debugging-pipe",
		"--user-data-dir=" + filepath.Join(d.state, "browser-profile")} {
		if !slices.Contains(args, want) {
			t.Errorf("chromium's command line %q lacks %s", args, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(d.state, "browser-profile")); err != nil || !fi.IsDir() {
		t.Errorf("no profile folder under the state folder: %v", err)
	}
	// Its temporary folder (where Chromium keeps its singleton folder,
	// org.chromium.Chromium.*) is next to the profile, not the machine's
	// /tmp, where a killed Chromium would leave it behind.
	tmp := filepath.Join(d.state, "browser-tmp")
	if environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); !slices.Contains(strings.Split(string(environ), "\x00"), "TMPDIR="+tmp) {
		t.Errorf("chromium's TMPDIR is not %s", tmp)
	}
	if m, _ := filepath.Glob(filepath.Join(tmp, "org.chromium.Chromium.*")); len(m) == 0 {
		t.Errorf("no singleton folder of chromium's in %s", tmp)
	}

	// Killed: started again, in a new process group, answering CDP.
	group := lnGroup(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var again int
	waitUntil(t, 30*time.Second, "chromium was not started again after it was killed", func() bool {
		again = lnChild(d.Cmd().Process.Pid, "chromium")
		return again != 0 && again != pid && d.lnCDPViaDaemon()
	})
	waitUntil(t, 10*time.Second, "the killed chromium's helpers outlived it", func() bool {
		return !slices.ContainsFunc(group, isoAlive)
	})
	if !strings.Contains(d.Logs(), "restarting") {
		t.Errorf("the restart is not logged:\n%s", d.Logs())
	}
	if b := d.lnBrowserCaps(t); b["status"] != "ready" {
		t.Errorf("after the restart capabilities.browser = %v, want ready", b)
	}
	// The killed one's singleton folder was swept at the restart.
	if m, _ := filepath.Glob(filepath.Join(tmp, "org.chromium.Chromium.*")); len(m) != 1 {
		t.Errorf("singleton folders in %s after a restart: %v, want the new one only", tmp, m)
	}
}

// TestAiodLaunchBrowserMissing: an executable that is not there stops
// aiod --browser at once with exit 1 and a reason naming the package.
func TestAiodLaunchBrowserMissing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Bin(t, "aiod"), "--port", "0", "--browser")
	cmd.Env = append(os.Environ(), "BROWSER_EXECUTABLE_PATH=/nonexistent/chromium", "AIO_STATE_DIR="+t.TempDir(),
		"BROWSER_REMOTE_DEBUGGING_PORT="+freePort(t))
	out, err := cmd.CombinedOutput()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	const want = "aiod: --browser: no Chromium executable (BROWSER_EXECUTABLE_PATH=/nonexistent/chromium is not an executable file); install it with: apt-get install chromium\n"
	if code != 1 || string(out) != want {
		t.Errorf("exit %d, output %q; want 1 and %q", code, out, want)
	}
}

// TestAiodLaunchDesktop: aiod --desktop --browser runs Xvfb on a free
// display from :99, openbox on it (an EWMH window manager) and the
// computer-use worker on AIO_COMPUTER_USE_URL's port, and Chromium
// headful on that display; the computer-use plane answers through the
// worker; everything ends with the daemon (checked at cleanup).
func TestAiodLaunchDesktop(t *testing.T) {
	lnNeed(t, "chromium", "Xvfb", "openbox", "xdotool", "xprop")
	wport := freePort(t)
	const key = "ln-desk-key"
	d := lnStart(t, []string{"AIO_COMPUTER_USE_URL=http://127.0.0.1:" + wport}, "--desktop", "--browser", "--api-key", key)
	d.a.key = key
	daemon := d.Cmd().Process.Pid
	xvfb := lnChild(daemon, "Xvfb")
	if xvfb == 0 {
		t.Fatalf("no Xvfb child of the daemon; logs:\n%s", d.Logs())
	}
	args := lnCmdline(xvfb)
	if len(args) < 2 || !strings.HasPrefix(args[1], ":") || !slices.Contains(args, "1920x1080x24") || !slices.Contains(args, "tcp") {
		t.Fatalf("Xvfb's command line %q: want :N -screen 0 1920x1080x24 -nolisten tcp", args)
	}
	display := args[1]
	if n, _ := strconv.Atoi(display[1:]); n < 99 {
		t.Errorf("display %s, want :99 or above", display)
	}
	if lnChild(daemon, "openbox") == 0 {
		t.Errorf("no openbox child of the daemon")
	}
	x := func(name string, args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), "DISPLAY="+display)
		out, _ := cmd.Output()
		return string(out)
	}
	waitUntil(t, 15*time.Second, "openbox does not manage the display", func() bool {
		return strings.Contains(x("xprop", "-root", "_NET_SUPPORTING_WM_CHECK"), "window id")
	})
	if br := lnChild(daemon, "chromium"); br == 0 || slices.Contains(lnCmdline(br), "--headless=new") {
		t.Errorf("chromium (pid %d) is not running headful on the display", br)
	}
	waitUntil(t, 15*time.Second, "no Chromium window on the display", func() bool {
		return strings.TrimSpace(x("xdotool", "search", "--onlyvisible", "--name", "Chromium")) != ""
	})
	if !d.lnCDPViaDaemon() {
		t.Errorf("the headful browser does not answer CDP at the daemon's /cdp")
	}

	// The worker, through the daemon's computer-use plane.
	var info map[string]any
	waitUntil(t, 20*time.Second, "the computer-use plane does not answer through the worker", func() bool {
		code, e := d.a.call("GET", "/v2/computer/info", "/v2/computer/info", nil)
		info = e.obj()
		return code == 200
	})
	if info["available"] != true || info["display"] != display {
		t.Errorf("computer info = %v, want available on %s", info, display)
	}
	res, _ := info["screen_resolution"].(map[string]any)
	if res["width"] != 1920.0 || res["height"] != 1080.0 {
		t.Errorf("screen_resolution = %v, want 1920x1080", res)
	}

	// The worker has a key of its own: the daemon's key, and no key,
	// are refused on its port; only the daemon, which replaces its
	// clients' credentials by the worker's key, gets in. The key is in
	// the worker's environment; the daemon's key is not.
	worker := "http://127.0.0.1:" + wport
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer " + key}, {"X-Api-Key", key}} {
		req, _ := http.NewRequest(http.MethodGet, worker+"/v2/computer/info?api_key="+key, nil)
		if hdr != nil {
			req.Header.Set(hdr[0], hdr[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the worker's own port with the daemon's key (%v): %d, want 401", hdr, resp.StatusCode)
		}
	}
	if code, _ := d.a.call("GET", "/v2/computer/cursor", "/v2/computer/cursor?api_key="+key, nil); code != 200 {
		t.Errorf("cursor through the daemon with ?api_key=: %d, want 200", code)
	}
	wpid := lnChild(daemon, "aiod")
	environ, _ := os.ReadFile("/proc/" + strconv.Itoa(wpid) + "/environ")
	if wpid == 0 || !bytes.Contains(environ, []byte("\x00AIO_API_KEY=")) && !bytes.HasPrefix(environ, []byte("AIO_API_KEY=")) ||
		bytes.Contains(environ, []byte(key)) {
		t.Errorf("the worker (pid %d) should hold a key of its own and not the daemon's", wpid)
	}
}

// TestAiodLaunchIsolated: under --isolation namespaces the browser runs
// in the sandbox as its account, and the daemon reaches it over its
// DevTools pipe: no port on the host's loopback nor in the sandbox's
// network, under --network none and --network host alike. The profile
// lies in the workspace's .aiod folder, made by the sandbox account.
func TestAiodLaunchIsolated(t *testing.T) {
	requireRoot(t)
	lnNeed(t, "chromium")
	for _, network := range []string{"none", "host"} {
		t.Run(network, func(t *testing.T) {
			ws := t.TempDir()
			d := lnStart(t, nil, "--browser", "--workspace", ws, "--isolation", "namespaces", "--network", network)
			if b := d.lnBrowserCaps(t); b["status"] != "ready" || b["cdp"] != true {
				t.Errorf("capabilities.browser = %v, want ready with cdp (reached through the daemon)", b)
			}
			if lnCDPAnswers(d.cdp) {
				t.Errorf("DevTools answers on the host's loopback")
			}
			pid := lnChild(d.Cmd().Process.Pid, "chromium")
			if pid == 0 {
				t.Fatalf("no chromium child of the daemon; logs:\n%s", d.Logs())
			}
			if l := cdpListeners(t, lnGroup(pid)); len(l) != 0 {
				t.Errorf("chromium listens on TCP %v in the sandbox; want no port", l)
			}
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil || !strings.Contains(string(st), fmt.Sprintf("\nUid:\t%d\t", sandboxUID)) {
				t.Errorf("chromium does not run as the sandbox account:\n%s", st)
			}
			self, _ := os.Readlink("/proc/self/ns/pid")
			if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); ns == self {
				t.Errorf("chromium runs in the host's PID namespace")
			}
			profile := filepath.Join(ws, ".aiod", "browser-profile")
			if !slices.Contains(lnCmdline(pid), "--user-data-dir="+profile) {
				t.Errorf("chromium's command line %q: want the profile %s", lnCmdline(pid), profile)
			}
			if fi, err := os.Stat(profile); err != nil || fi.Sys().(*syscall.Stat_t).Uid != sandboxUID {
				t.Errorf("profile %s: %v, want a folder of the sandbox account", profile, err)
			}
			// A page through the browser plane, which dials as the probe.
			code, e := d.a.call("POST", "/v2/browser/evaluate", "/v2/browser/evaluate", map[string]any{"expression": "6*7"})
			if v, _ := e.obj()["value"].(float64); code != 200 || v != 42 {
				t.Errorf("evaluate through the plane: %d %s", code, e.raw)
			}
		})
	}
}

// TestAiodLaunchIsolatedDesktop: under --isolation namespaces with a
// network of the sandbox's own, aiod --desktop --browser runs Xvfb, the
// worker and a headful Chromium in the sandbox as its account; the
// computer-use plane reaches the worker there (screenshot, an action,
// the cursor), while nothing on the host can connect to the worker's
// port.
func TestAiodLaunchIsolatedDesktop(t *testing.T) {
	requireRoot(t)
	lnNeed(t, "chromium", "Xvfb", "openbox", "xdotool")
	wport := freePort(t)
	d := lnStart(t, []string{"AIO_COMPUTER_USE_URL=http://127.0.0.1:" + wport},
		"--desktop", "--browser", "--workspace", t.TempDir(), "--isolation", "namespaces", "--network", "none")
	var info map[string]any
	waitUntil(t, 30*time.Second, "the computer-use plane does not answer through the sandboxed worker", func() bool {
		code, e := d.a.call("GET", "/v2/computer/info", "/v2/computer/info", nil)
		info = e.obj()
		return code == 200 && info["available"] == true
	})
	daemon := d.Cmd().Process.Pid
	for _, comm := range []string{"Xvfb", "chromium"} {
		pid := lnChild(daemon, comm)
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if pid == 0 || err != nil || !strings.Contains(string(st), fmt.Sprintf("\nUid:\t%d\t", sandboxUID)) {
			t.Errorf("%s (pid %d) does not run as the sandbox account: %v", comm, pid, err)
		}
	}
	resp, body := d.a.raw("GET", "/v2/computer/screenshot", nil)
	if resp.StatusCode != 200 || !bytes.HasPrefix(body, []byte("\x89PNG\r\n\x1a\n")) || resp.Header.Get("X-Screen-Width") != "1920" {
		t.Errorf("screenshot: %d %s, %d bytes", resp.StatusCode, resp.Header, len(body))
	}
	if code, e := d.a.call("POST", "/v2/computer/actions", "/v2/computer/actions", map[string]any{"action_type": "MOVE_TO", "x": 321, "y": 123}); code != 200 {
		t.Errorf("MOVE_TO: %d %s", code, e.raw)
	}
	if code, e := d.a.call("GET", "/v2/computer/cursor", "/v2/computer/cursor", nil); code != 200 || e.obj()["x"] != 321.0 || e.obj()["y"] != 123.0 {
		t.Errorf("cursor: %d %s, want 321,123", code, e.raw)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+wport, time.Second); err == nil {
		c.Close()
		t.Errorf("the worker's port answers on the host's loopback under --network none")
	}
}
