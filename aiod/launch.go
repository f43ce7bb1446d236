package aiod

// This file wires package launch into the daemon: the programs
// aiod --browser and aiod --desktop run, the dialer the browser and
// computer-use planes reach them with, and the /cdp proxy a2c up serves.

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/browser"
	"github.com/a2c-smcp/a2c-go/aiod/computer"
	"github.com/a2c-smcp/a2c-go/aiod/internal/desktools"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sessions"
	"github.com/a2c-smcp/a2c-go/aiod/launch"
	"github.com/a2c-smcp/a2c-go/internal/credenv"
)

// Screen size of the display aiod --desktop starts.
const desktopWidth, desktopHeight = 1920, 1080

// programs are the browser and desktop the daemon runs itself. Their
// fields are set by startPrograms before anything is served and only
// read afterwards.
type programs struct {
	display, wm, worker, browser *launch.Supervisor
	// displayNum is the X display (":N") of --desktop.
	displayNum int
	// inside are the loopback addresses (host:port) of the programs the
	// daemon runs in a sandbox with a network of its own: d.dial reaches
	// them there.
	inside map[string]bool
	// workerKey is the computer-use worker's own key (random, per start
	// of the daemon): the worker knows it, the computer plane presents
	// it; the daemon's API key never leaves the daemon.
	workerKey string
	// cdp is aiod --browser's DevTools multiplexer: Chromium's pipe,
	// served at /cdp and to the browser plane (nil without --browser).
	cdp *launch.CDPMux
}

// defaultStateDir is $XDG_STATE_HOME/aiod, else ~/.local/state/aiod.
func defaultStateDir() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "aiod"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state folder: %w (set --state-dir or AIO_STATE_DIR)", err)
	}
	return filepath.Join(home, ".local", "state", "aiod"), nil
}

// startPrograms starts what Config.Browser and Config.Desktop ask for:
// the display, its window manager and the computer-use worker first (the
// browser runs headful on that display when both are asked), then
// Chromium; each is ready (or the daemon does not start) before it
// returns. Under isolation they run in the sandbox as every process the
// daemon starts.
func (d *Daemon) startPrograms(ctx context.Context) error {
	if !d.cfg.Browser && !d.cfg.Desktop {
		return nil
	}
	d.programs.inside = map[string]bool{}
	ownNet := d.sandbox != nil && d.cfg.Isolation.Network == sandbox.NetworkNone
	start := func(cmd *exec.Cmd) func() error { return d.sandbox.Wrap(cmd, cmd.Start) }
	ok := false
	defer func() {
		if !ok {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = d.stopPrograms(sctx)
		}
	}()

	if d.cfg.Desktop {
		wu, err := url.Parse(cmp.Or(d.cfg.ComputerUseURL, computer.DefaultURL))
		if err != nil || wu.Port() == "" && wu.Scheme != "http" {
			return fmt.Errorf("--desktop: AIO_COMPUTER_USE_URL %q has no port", d.cfg.ComputerUseURL)
		}
		workerAddr := hostPort(wu)
		if ownNet {
			d.programs.inside[loopbackKey(workerAddr)] = true
		}
		// what aiod starts itself; the worker checks its own tools
		if m := desktools.Missing("Xvfb", "openbox"); len(m) > 0 {
			return fmt.Errorf("--desktop: %w", &launch.MissingError{Program: m[0].Name, Package: m[0].Package, Detail: "looked for " + m[0].Name + " on PATH"})
		}
		env := d.programEnv()
		sup, n, err := launch.StartDisplay(ctx, launch.DisplayOptions{Width: desktopWidth, Height: desktopHeight, Start: start,
			Env: env, Logger: d.log, Sandboxed: d.sandbox != nil})
		if err != nil {
			return fmt.Errorf("--desktop: %w", err)
		}
		d.programs.display, d.programs.displayNum = sup, n
		disp := "DISPLAY=:" + strconv.Itoa(n)
		d.log.Debug("launch: X display up", "display", ":"+strconv.Itoa(n), "pid", sup.PID(), "size", fmt.Sprintf("%dx%d", desktopWidth, desktopHeight))
		wm, _ := exec.LookPath("openbox")
		if d.programs.wm, err = launch.Start(ctx, launch.Program{Name: "openbox", Start: start, Sandboxed: d.sandbox != nil, Logger: d.log, Grace: 2 * time.Second,
			Command: func() (*exec.Cmd, error) {
				cmd := exec.Command(wm, "--sm-disable")
				cmd.Env, cmd.Dir = append(env, disp), "/"
				return cmd, nil
			}}); err != nil {
			return fmt.Errorf("--desktop: %w", err)
		}
		exe, err := d.selfExecutable()
		if err != nil {
			return fmt.Errorf("--desktop: the computer-use worker: %w", err)
		}
		listen := "AIO_COMPUTER_USE_LISTEN=" + workerAddr
		// Its own key (d.programs.workerKey): whatever reaches its port
		// without going through the daemon is refused.
		key := EnvAPIKey + "=" + d.programs.workerKey
		worker, err := launch.Start(ctx, launch.Program{Name: "computer-use", Start: start, Sandboxed: d.sandbox != nil, Logger: d.log, Grace: 3 * time.Second,
			ReadyTimeout: 20 * time.Second,
			Command: func() (*exec.Cmd, error) {
				cmd := exec.Command(exe, "computer-use")
				cmd.Env, cmd.Dir = append(env, disp, listen, key), "/"
				return cmd, nil
			},
			Ready: d.workerReady(workerAddr)})
		if err != nil {
			return fmt.Errorf("--desktop: the computer-use worker on %s (AIO_COMPUTER_USE_URL): %w", workerAddr, err)
		}
		d.programs.worker = worker
		d.log.Debug("launch: computer-use worker started", "listen", workerAddr, "pid", worker.PID())
	}

	if d.cfg.Browser {
		br, err := launch.FindBrowser(os.Getenv)
		if err != nil {
			return fmt.Errorf("--browser: %w", err)
		}
		profile, home, err := d.browserProfile()
		if err != nil {
			return fmt.Errorf("--browser: %w", err)
		}
		opts := launch.BrowserOptions{Profile: profile, Headful: d.cfg.Desktop, NoDevShm: d.sandbox != nil}
		env := d.programEnv()
		if home != "" {
			env = append(env, "HOME="+home)
		}
		if d.cfg.Desktop {
			env = append(env, "DISPLAY=:"+strconv.Itoa(d.programs.displayNum))
		}
		// This start's DevTools pipe: Chromium reads fd 3 (toR) and writes
		// fd 4 (fromW); the multiplexer holds the other ends from Started
		// on. A start that fails before Started leaves all four open: the
		// next Command and a failed Start close them.
		var toR, toW, fromR, fromW *os.File
		closePipes := func() {
			for _, f := range []*os.File{toR, toW, fromR, fromW} {
				if f != nil {
					_ = f.Close()
				}
			}
			toR, toW, fromR, fromW = nil, nil, nil, nil
		}
		mux := d.programs.cdp
		sup, err := launch.Start(ctx, launch.Program{Name: "chromium", Start: start, Sandboxed: d.sandbox != nil, Logger: d.log, ReadyTimeout: 30 * time.Second,
			Command: func() (*exec.Cmd, error) {
				closePipes()
				var err error
				if toR, toW, err = os.Pipe(); err != nil {
					return nil, fmt.Errorf("devtools pipe: %w", err)
				}
				if fromR, fromW, err = os.Pipe(); err != nil {
					closePipes()
					return nil, fmt.Errorf("devtools pipe: %w", err)
				}
				cmd := exec.Command(br.Path, launch.BrowserArgs(opts)...)
				cmd.Env, cmd.Dir = env, "/"
				cmd.ExtraFiles = []*os.File{toR, fromW}
				if d.sandbox == nil {
					// In a sandbox Chromium has the sandbox's own /tmp
					// (its shared memory lives there too), gone with it.
					tmp, err := d.freshBrowserTmp(profile)
					if err != nil {
						closePipes()
						return nil, fmt.Errorf("browser temporary folder: %w", err)
					}
					cmd.Env = append(slices.Clip(env), "TMPDIR="+tmp)
				}
				return cmd, nil
			},
			Started: func(context.Context, *exec.Cmd) error {
				_ = toR.Close() // Chromium has its copies
				_ = fromW.Close()
				mux.Attach(toW, fromR) // the multiplexer owns these now
				toR, toW, fromR, fromW = nil, nil, nil, nil
				return nil
			},
			Ready: mux.Ready})
		if err != nil {
			closePipes()
			return fmt.Errorf("--browser: %w", err)
		}
		d.programs.browser = sup
		d.log.Debug("launch: browser up", "executable", br.Path, "cdp", "pipe", "profile", profile, "headless", !d.cfg.Desktop, "pid", sup.PID())
	}
	if d.programs.display != nil {
		// Programs on the display lose it when the X server dies: they
		// start again on the restarted one.
		d.programs.display.OnRestart(func() {
			d.programs.wm.Restart()
			d.programs.worker.Restart()
			if d.programs.browser != nil {
				d.programs.browser.Restart()
			}
		})
	}
	ok = true
	return nil
}

// workerReady is the computer-use worker's readiness check: what
// answers on addr must be this daemon's own worker, never another
// program that holds the port (the worker would then fail to listen and
// the daemon forward its clients to the squatter). The worker alone
// knows d.programs.workerKey: GET /capabilities must answer 401 to a
// wrong key of the same length and 200 to the worker's.
func (d *Daemon) workerReady(addr string) func(ctx context.Context) error {
	hc := &http.Client{Transport: &http.Transport{DialContext: d.dial, DisableKeepAlives: true}}
	wrong := rand.Text()
	for len(wrong) < len(d.programs.workerKey) {
		wrong += rand.Text()
	}
	wrong = wrong[:len(d.programs.workerKey)]
	probe := func(ctx context.Context, key string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/capabilities", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	return func(ctx context.Context) error {
		code, err := probe(ctx, wrong)
		if err != nil {
			return err
		}
		if code == http.StatusOK {
			return fmt.Errorf("another program answers on %s (it accepts any key)", addr)
		}
		if code, err = probe(ctx, d.programs.workerKey); err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("another program answers on %s (GET /capabilities: %d)", addr, code)
		}
		return nil
	}
}

// stopPrograms ends them: the browser first, then the worker, the window
// manager and the X server, each with its whole process group, reaped.
func (d *Daemon) stopPrograms(ctx context.Context) error {
	var errs []error
	for _, s := range []*launch.Supervisor{d.programs.browser, d.programs.worker, d.programs.wm, d.programs.display} {
		if err := s.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if d.programs.cdp != nil {
		d.programs.cdp.Close()
	}
	return errors.Join(errs...)
}

// browserProfile is the folder Chromium keeps its profile in (made if
// missing) and, under isolation, the HOME it is given. Without isolation
// it is <StateDir>/browser-profile. In the sandbox, whose view holds
// only the system folders, its own /tmp and the workspace, it is
// <workspace>/.aiod/browser-profile, made by the sandbox account (so it
// persists with the workspace and the browser can write it); when the
// account cannot write the workspace, the sandbox's /tmp.
func (d *Daemon) browserProfile() (profile, home string, err error) {
	if d.sandbox == nil {
		dir := d.cfg.StateDir
		if dir == "" {
			if dir, err = defaultStateDir(); err != nil {
				return "", "", err
			}
		}
		profile = filepath.Join(dir, "browser-profile")
		if err := os.MkdirAll(profile, 0o700); err != nil {
			return "", "", fmt.Errorf("browser profile: %w", err)
		}
		return profile, "", nil
	}
	for _, base := range []string{filepath.Join(d.cfg.Workspace, ".aiod"), "/tmp/aiod"} {
		profile = filepath.Join(base, "browser-profile")
		if err = d.sandbox.Do(func() error { return os.MkdirAll(profile, 0o700) }); err == nil {
			return profile, base, nil
		}
	}
	return "", "", fmt.Errorf("browser profile in the sandbox: %w", err)
}

// freshBrowserTmp empties and makes again the TMPDIR Chromium is given
// outside a sandbox, next to its profile: Chromium keeps its
// process-singleton folder there (org.chromium.Chromium.*), which a
// Chromium that was killed leaves behind; this way none lands in the
// machine's /tmp, and each start sweeps what the last one left.
func (d *Daemon) freshBrowserTmp(profile string) (string, error) {
	tmp := filepath.Join(filepath.Dir(profile), "browser-tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	return tmp, os.MkdirAll(tmp, 0o700)
}

// selfExecutable is how a sandboxed process executes this binary: the
// daemon's own file is usually outside the sandbox's view, but
// /proc/self/exe of the child (a fork of the daemon until it executes;
// the sandbox's Wrap passes a descriptor of this binary where the child
// executes another program first) is this binary wherever it lies.
func (d *Daemon) selfExecutable() (string, error) {
	if d.sandbox != nil {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// programEnv is the environment of the programs: the daemon's, without
// any credential variable (package credenv) and without the API key
// under any other name (no program needs it; the computer-use worker is
// given its own key on purpose). In a sandbox it is only what a sandboxed
// command gets ([sessions.SandboxEnv]): the programs run as the sandbox's
// account, so every command there can read their environment, and the
// daemon's may hold any secret of its launcher's (a cloud key, a token)
// that no list of names can know.
func (d *Daemon) programEnv() []string {
	hide := append(keyHolders(d.cfg.APIKey, os.Environ()), "DISPLAY", "AIO_COMPUTER_USE_LISTEN")
	env := credenv.Environ(hide...)
	if d.sandbox != nil {
		env = sessions.SandboxEnv(env)
	}
	return env
}

// dial opens a connection to a program the daemon reaches over TCP (the
// browser's DevTools port, the computer-use worker): inside the
// sandbox's network when the daemon runs that program in a sandbox with
// a network of its own (--network none), else a plain dial.
func (d *Daemon) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	// A pool's daemon runs in the pool's process, on the host's network:
	// its sandbox's browser and worker can only be in the sandbox, and
	// a plain dial would reach the host's loopback (another program's
	// DevTools or worker port) from a sandbox with a network of its own.
	if d.programs.inside[loopbackKey(addr)] || d.cfg.Pooled && d.sandbox != nil {
		return d.dialInside(ctx, network, addr)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

// pipeEndpoint is the DevTools endpoint the browser plane is given under
// --browser: a name only, dialed in process (CDPMux.Dial), never a port.
const pipeEndpoint = "http://devtools.pipe"

// browserConfig is the browser plane's configuration, with /cdp: under
// --browser the DevTools multiplexer of the Chromium the daemon runs
// (made here, attached to each Chromium as it starts), which the plane
// reaches in process; else a proxy to the browser at CDPEndpoint (one
// the user runs), through the daemon's dialer.
func (d *Daemon) browserConfig() browser.Config {
	if d.cfg.Browser {
		d.programs.cdp = launch.NewCDPMux(d.log)
		return browser.Config{CDPEndpoint: pipeEndpoint, Dial: d.programs.cdp.Dial, CDP: d.programs.cdp, Logger: d.log}
	}
	cfg := browser.Config{CDPEndpoint: d.cfg.CDPEndpoint, Dial: d.dial, Logger: d.log}
	if p, err := launch.NewCDPProxy(d.cfg.CDPEndpoint, d.dial); err == nil {
		cfg.CDP = p
	}
	return cfg
}

// cdpEndpointName is capabilities.browser.cdp_endpoint: "pipe" under
// --browser (Chromium has no port; /cdp serves it), else CDPEndpoint.
func (d *Daemon) cdpEndpointName() string {
	if d.cfg.Browser {
		return "pipe"
	}
	return d.cfg.CDPEndpoint
}

// CDPBrowserPath is the path of the browser's DevTools WebSocket under
// /cdp (/devtools/browser/<id>) under --browser, "" otherwise: what a2c
// up prints as its cdp_url.
func (d *Daemon) CDPBrowserPath() string {
	if d.programs.cdp == nil {
		return ""
	}
	return d.programs.cdp.BrowserPath()
}

// Display is the X display aiod --desktop runs (":99"), or "".
func (d *Daemon) Display() string {
	if d.programs.display == nil {
		return ""
	}
	return ":" + strconv.Itoa(d.programs.displayNum)
}

// hostPort is u's host:port, the scheme's port when it names none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		default:
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// loopbackKey normalises a loopback host:port (localhost → 127.0.0.1) so
// that the planes' addresses match the programs'; other addresses are
// returned as they are.
func loopbackKey(addr string) string {
	if ap, err := resolveLoopback(addr); err == nil {
		return ap.String()
	}
	return addr
}

// resolveLoopback parses a loopback host:port; "localhost" is
// 127.0.0.1. Anything else is an error: the sandbox is reached on its
// own loopback only.
func resolveLoopback(addr string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return netip.AddrPort{}, fmt.Errorf("%s is not a loopback address", host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port %q", port)
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(p)), nil
}
