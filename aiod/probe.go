package aiod

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/interp"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"

	"github.com/a2c-smcp/a2c-go/aiod/browser"
	"github.com/a2c-smcp/a2c-go/aiod/computer"
	"github.com/a2c-smcp/a2c-go/aiod/launch"
)

// Status of a probed plane.
const (
	statusReady    = "ready"
	statusDegraded = "degraded"
	statusAbsent   = "absent"
)

// capabilitiesSchema names the shape of the capability snapshot.
const capabilitiesSchema = "aiod.capabilities/v1"

// Capabilities is the snapshot GET /v1/capabilities serves and GET
// /v2/sandbox embeds: which planes have a backend on this machine and the
// binaries behind them. Clients branch on it rather than on 404s.
type Capabilities struct {
	Schema          string              `json:"schema"`
	Files           map[string]bool     `json:"files"`
	Exec            execCaps            `json:"exec"`
	Bins            bins                `json:"bins"`
	Browser         browserCaps         `json:"browser"`
	CodeInterpreter codeCaps            `json:"code_interpreter"`
	Computer        computer.Capability `json:"computer"`
	// Isolation is the containment in force and what the machine allows.
	Isolation isolationCaps `json:"isolation"`

	runtime runtimeEnv // for /v2/sandbox's detail
	utils   []toolCategory
}

// isolationCaps is /v1/capabilities' isolation: the sandbox's report
// (what is enforced, and how) and what this machine allows.
type isolationCaps struct {
	sandbox.Report
	Machine sandbox.Machine `json:"machine"`
}

type execCaps struct {
	Shell bool `json:"shell"`
	Bash  bool `json:"bash"`
	PTY   bool `json:"pty"`
}

type bins struct {
	Bash       *string `json:"bash"`
	Sh         *string `json:"sh"`
	PS         *string `json:"ps"`
	PowerShell *string `json:"powershell"`
	Cmd        *string `json:"cmd"`
}

type browserCaps struct {
	Status           string   `json:"status"`
	Executable       *string  `json:"executable"`
	ExecutableSource *string  `json:"executable_source"`
	Process          bool     `json:"process"`
	CDP              bool     `json:"cdp"`
	CDPEndpoint      string   `json:"cdp_endpoint"`
	Missing          []string `json:"missing"`
	Warnings         []string `json:"warnings"`
}

type codeCaps struct {
	Status            string   `json:"status"`
	Backend           *string  `json:"backend"`
	JavascriptBackend *string  `json:"javascript_backend"`
	JupyterBackend    *string  `json:"jupyter_backend"`
	Kinds             []string `json:"kinds"`
	DefaultPython     *string  `json:"default_python"`
	DefaultNode       *string  `json:"default_node"`
	PythonKernels     []string `json:"python_kernels"`
	Endpoint          *string  `json:"endpoint"`
	Missing           []string `json:"missing"`
	Warnings          []string `json:"warnings"`
}

type toolSpec struct {
	Ver   *string  `json:"ver"`
	Bin   *string  `json:"bin"`
	Alias []string `json:"alias"`
}

type runtimeEnv struct {
	Python []toolSpec `json:"python"`
	Nodejs []toolSpec `json:"nodejs"`
}

type availableTool struct {
	Name        string  `json:"name"`
	Description *string `json:"description"`
}

type toolCategory struct {
	Category string          `json:"category"`
	Tools    []availableTool `json:"tools"`
}

// prober keeps the capability snapshot: probed once at start, served from
// cache for 5 s, re-probed in the background when stale (the stale one is
// served meanwhile) or in the foreground on ?refresh=true.
type prober struct {
	ttl time.Duration
	cdp string
	// computer is the computer-use plane, which asks its worker.
	computer *computer.Plane
	// browser is the browser plane, which probes the DevTools endpoint
	// through the daemon's dialer (inside the sandbox's network under
	// isolation). Nil: a plain HTTP probe of cdp.
	browser *browser.Plane
	// python and node pin the interpreters, as the code plane's config.
	python, node string
	// iso is the isolation in force, copied into every snapshot.
	iso      isolationCaps
	mu       sync.Mutex
	snap     *Capabilities
	at       time.Time
	inflight chan struct{}
	ctx      context.Context // the daemon's: ends background probes at shutdown
}

// start begins the first probe without waiting for it.
func (p *prober) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight == nil {
		p.inflight = make(chan struct{})
		go p.run(p.inflight)
	}
}

func (p *prober) get(ctx context.Context, refresh bool) *Capabilities {
	p.mu.Lock()
	fresh := p.snap != nil && time.Since(p.at) < p.ttl
	if fresh && !refresh {
		s := p.snap
		p.mu.Unlock()
		return s
	}
	wait := p.inflight
	if wait == nil {
		wait = make(chan struct{})
		p.inflight = wait
		go p.run(wait)
	}
	s := p.snap
	p.mu.Unlock()
	if s != nil && !refresh {
		return s
	}
	select {
	case <-wait:
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snap
}

func (p *prober) run(done chan struct{}) {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	s := probe(ctx, p.cdp, p.browser, p.computer, p.python, p.node)
	s.Isolation = p.iso
	p.mu.Lock()
	p.snap, p.at, p.inflight = s, time.Now(), nil
	p.mu.Unlock()
	close(done)
}

func strp(s string) *string { return &s }

func look(names ...string) *string {
	for _, n := range names {
		if n == "" {
			continue
		}
		if p, err := exec.LookPath(n); err == nil {
			return &p
		}
	}
	return nil
}

// probe looks at the machine: shells, interpreters, kernels, browser.
func probe(ctx context.Context, cdp string, br *browser.Plane, comp *computer.Plane, pinPython, pinNode string) *Capabilities {
	c := &Capabilities{Schema: capabilitiesSchema, Files: map[string]bool{}}
	for _, op := range []string{"native", "read", "write", "replace", "search", "find", "grep", "glob", "list", "download", "str_replace_editor"} {
		c.Files[op] = true
	}
	_, err := os.Stat("/proc/sys/fs/inotify")
	c.Files["watch"] = err == nil // inotify backs the watch plane
	c.Bins = bins{Bash: look("bash"), Sh: look("sh"), PS: look("ps")}
	c.Exec = execCaps{Shell: c.Bins.Bash != nil || c.Bins.Sh != nil, Bash: c.Bins.Bash != nil, PTY: ptyAvailable()}

	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); c.CodeInterpreter, c.runtime = probeCode(pinPython, pinNode) }()
	go func() { defer wg.Done(); c.Browser = probeBrowser(ctx, cdp, br) }()
	go func() { defer wg.Done(); c.utils = probeUtils() }()
	go func() {
		defer wg.Done()
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		c.Computer = comp.Probe(pctx, os.Getenv("DISPLAY"))
	}()
	wg.Wait()
	return c
}

// probeCode reports the interpreters the code plane runs: the daemon's
// one discovery (aiod/internal/interp) for the same pins, so the
// snapshot and the plane never disagree.
func probeCode(pinPython, pinNode string) (codeCaps, runtimeEnv) {
	cc := codeCaps{Status: statusAbsent, Kinds: []string{}, PythonKernels: []string{}, Missing: []string{}, Warnings: []string{}}
	rt := runtimeEnv{Python: []toolSpec{}, Nodejs: []toolSpec{}}
	f := interp.Shared(interp.Pins{Python: pinPython, Node: pinNode})
	py, node := f.Python(), f.Node()
	if py.Path != "" {
		cc.DefaultPython = strp(py.Path)
		rt.Python = append(rt.Python, toolSpec{Ver: nonEmpty(py.Version), Bin: strp(py.Path), Alias: []string{"python3", "python"}})
		if py.OK {
			cc.Backend, cc.JupyterBackend = strp("kernel"), strp("kernel")
			cc.PythonKernels = []string{"python3"}
			cc.Kinds = append(cc.Kinds, "code")
		} else {
			cc.Missing = append(cc.Missing, "ipykernel")
			cc.Warnings = append(cc.Warnings, "ipykernel is not importable: python cells answer 503 (install python3-ipykernel)")
		}
	} else {
		cc.Missing = append(cc.Missing, "python3")
	}
	if node.OK {
		cc.DefaultNode = strp(node.Path)
		rt.Nodejs = append(rt.Nodejs, toolSpec{Ver: nonEmpty(node.Version), Bin: strp(node.Path), Alias: []string{"node", "nodejs"}})
		cc.JavascriptBackend = strp("native")
		if cc.Backend == nil {
			cc.Kinds = append(cc.Kinds, "code")
		}
		cc.Kinds = append(cc.Kinds, "nodejs")
	} else {
		cc.Missing = append(cc.Missing, "node")
	}
	if cc.JupyterBackend != nil {
		cc.Kinds = append(cc.Kinds, "jupyter")
	}
	if cc.Backend != nil || node.OK {
		cc.Status = statusReady
	}
	return cc, rt
}

// nonEmpty is &s, or nil for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// probeBrowser reports capabilities.browser: ready when the DevTools
// endpoint answers GET /json/version within 300 ms (through the plane's
// dialer when br is set), degraded when only the executable is found
// (by launch.FindBrowser, the rule aiod --browser and doctor use too),
// absent otherwise.
func probeBrowser(ctx context.Context, cdp string, br *browser.Plane) browserCaps {
	b := browserCaps{Status: statusAbsent, CDPEndpoint: cdp, Missing: []string{}, Warnings: []string{}}
	if found, err := launch.FindBrowser(os.Getenv); err == nil {
		b.Executable, b.ExecutableSource = strp(found.Path), strp(found.Source)
	}
	b.Process = processRunning("chromium", "chrome", "headless_shell")
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	b.CDP = br.Probe(cctx)
	if b.Executable == nil {
		b.Missing = append(b.Missing, "browser executable")
	}
	if !b.CDP {
		b.Missing = append(b.Missing, "cdp")
		if b.Process {
			b.Warnings = append(b.Warnings, "browser process detected but CDP is unreachable")
		}
	}
	switch {
	case b.CDP:
		b.Status = statusReady
	case b.Executable != nil:
		b.Status = statusDegraded
	}
	return b
}

// processRunning reports whether a process whose command name starts with
// one of names runs on this machine (Linux /proc; false elsewhere).
func processRunning(names ...string) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue
		}
		for _, n := range names {
			if bytes.HasPrefix(comm, []byte(n)) {
				return true
			}
		}
	}
	return false
}

// knownUtils are the tools /v2/sandbox reports when found on PATH, by
// category.
var knownUtils = []struct {
	category string
	tools    [][2]string
}{
	{"editors", [][2]string{{"vim", "Vi IMproved"}, {"nano", "Small text editor"}, {"emacs", "GNU Emacs"}}},
	{"network", [][2]string{{"curl", "Transfer data with URLs"}, {"wget", "Retrieve files over HTTP/FTP"}, {"ssh", "OpenSSH client"}, {"nc", "Netcat"}}},
	{"search", [][2]string{{"grep", "Search text with patterns"}, {"rg", "ripgrep"}, {"find", "Search for files"}, {"fd", "Find files"}}},
	{"vcs", [][2]string{{"git", "Distributed version control"}}},
	{"build", [][2]string{{"make", "GNU Make"}, {"gcc", "GNU C compiler"}, {"go", "Go toolchain"}, {"cargo", "Rust package manager"}}},
	{"data", [][2]string{{"jq", "JSON processor"}, {"sqlite3", "SQLite shell"}}},
	{"archive", [][2]string{{"tar", "Tape archiver"}, {"zip", "Zip archiver"}, {"unzip", "Zip extractor"}, {"gzip", "Gzip compressor"}}},
	{"terminal", [][2]string{{"tmux", "Terminal multiplexer"}}},
}

func probeUtils() []toolCategory {
	out := []toolCategory{}
	for _, k := range knownUtils {
		cat := toolCategory{Category: k.category, Tools: []availableTool{}}
		for _, t := range k.tools {
			if look(t[0]) != nil {
				cat.Tools = append(cat.Tools, availableTool{Name: t[0], Description: strp(t[1])})
			}
		}
		if len(cat.Tools) > 0 {
			out = append(out, cat)
		}
	}
	return out
}

// listeningPorts reads the listening TCP ports from /proc/net/tcp{,6}.
func listeningPorts(procNet string) []string {
	seen := map[int]bool{}
	for _, f := range []string{procNet + "/tcp", procNet + "/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Scan() // header
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 4 || fs[3] != "0A" { // TCP_LISTEN
				continue
			}
			_, port, ok := strings.Cut(fs[1], ":")
			if n, err := strconv.ParseUint(port, 16, 16); ok && err == nil {
				seen[int(n)] = true
			}
		}
	}
	ports := make([]int, 0, len(seen))
	for p := range seen {
		ports = append(ports, p)
	}
	sort.Ints(ports)
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = strconv.Itoa(p)
	}
	return out
}

// osVersion is PRETTY_NAME from os-release, or the kernel release.
func osVersion() string {
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				return strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return runtime.GOOS
}

func accountName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

// ptyAvailable reports whether the terminals plane can open a PTY.
func ptyAvailable() bool {
	_, err := os.Stat("/dev/ptmx")
	return err == nil
}
