package aiod

// This file is `aiod doctor`: what each plane needs on this machine,
// whether it is there, and what to install on Debian when it is not.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/desktools"
	"github.com/a2c-smcp/a2c-go/aiod/internal/interp"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/aiod/launch"
)

// doctorRequired are the planes a default daemon serves with nothing but
// the operating system and a POSIX shell; doctor exits 1 when one of
// them is unusable. Every other plane is optional: a missing dependency
// makes its routes answer 503 (or its tools isError), as aiod documents,
// and the daemon still starts.
var doctorRequired = []string{"commands", "files", "terminals", "watch"}

// doctorCheck is one plane's line of the report.
type doctorCheck struct {
	Plane    string   `json:"plane"`
	Required bool     `json:"required"`
	OK       bool     `json:"ok"`
	Needs    string   `json:"needs"`
	Found    string   `json:"found,omitempty"`
	Problem  string   `json:"problem,omitempty"`
	Fix      string   `json:"fix,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// doctorReport is the whole report (`aiod doctor --json` prints it).
type doctorReport struct {
	Version   string        `json:"version"`
	Workspace string        `json:"workspace"`
	OK        bool          `json:"ok"` // every required plane is usable
	Required  []string      `json:"required"`
	Planes    []doctorCheck `json:"planes"`
}

// doctorStepTimeout bounds each check; an interpreter probe may take
// several seconds on a cold machine.
const doctorStepTimeout = 30 * time.Second

func runDoctor(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("aiod doctor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	workspace := fs.String("workspace", "", "the workspace to check, as aiod start --workspace (default the account's home)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	synopsis := "Usage: aiod doctor [--workspace DIR] [--json]\n\n" +
		"Checks, without listening, what each plane needs: required planes (" + strings.Join(doctorRequired, ", ") + ")\n" +
		"make it exit 1 when unusable; the others are optional (their routes answer 503 until installed).\n" +
		"It reads the same environment as aiod start (AIO_DEFAULT_USER, AIO_PYTHON_BIN, EXTRA_MCP_SERVERS, ...)."
	if help, err := parseSub(fs, args, stdout, synopsis); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("doctor takes no argument, got " + fmt.Sprintf("%q", fs.Arg(0)))
	}
	cfg, err := ConfigFromEnv()
	if err != nil {
		return usageError(err.Error())
	}
	cfg.Workspace = *workspace
	cfg.APISurface = SurfaceFull // every plane is checked, whatever the surface served
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Revision = revision()
	cfg.Isolation.keepOwner = true // doctor changes nothing
	// A sandbox that cannot start is the isolation check's failure, not
	// doctor's: the planes are then checked without one.
	d, err := New(cfg)
	var isoErr error
	if err != nil && cfg.Isolation.Mode == sandbox.Namespaces {
		isoErr, cfg.Isolation = err, Isolation{}
		d, err = New(cfg)
	}
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(sctx)
	}()
	r := doctor(ctx, d)
	r.Planes = append(r.Planes, isolationCheck(d, isoErr))
	r.OK = r.OK && (r.Planes[len(r.Planes)-1].OK || !r.Planes[len(r.Planes)-1].Required)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		printDoctor(stdout, r)
	}
	if !r.OK {
		return exitError(1)
	}
	return nil
}

// doctor checks every plane of d. The planes the daemon runs itself are
// asked through its own handler, in process, exactly as a client would
// (so their discovery rules and messages are the planes' own); the
// interpreters through the daemon's one discovery (aiod/internal/interp);
// browser and desktop through the capability probe.
func doctor(ctx context.Context, d *Daemon) doctorReport {
	c := &doctorClient{h: d.Handler(), key: d.cfg.APIKey}
	ws := d.cfg.Workspace
	r := doctorReport{Version: versionLine(), Workspace: ws, Required: doctorRequired}
	add := func(ch doctorCheck) {
		for _, p := range doctorRequired {
			ch.Required = ch.Required || p == ch.Plane
		}
		r.Planes = append(r.Planes, ch)
	}

	// commands: a real command through the commands plane.
	ch := doctorCheck{Plane: "commands", Needs: "a shell (bash, else sh) and a usable default account (AIO_DEFAULT_USER)",
		Fix: "apt-get install bash; check that AIO_DEFAULT_USER names an account"}
	if e, ok := c.call(ctx, &ch, "POST", "/v2/commands", `{"command":"printf %s \"${BASH:-sh}\""}`); ok {
		var data struct {
			Status   string `json:"status"`
			ExitCode *int   `json:"exit_code"`
			Stdout   string `json:"stdout"`
			Stderr   string `json:"stderr"`
		}
		_ = json.Unmarshal(e.Data, &data)
		if data.Status == "completed" && data.ExitCode != nil && *data.ExitCode == 0 {
			ch.OK, ch.Found = true, "runs commands with "+data.Stdout
		} else {
			ch.Problem = fmt.Sprintf("a test command ended %s: %s", data.Status, strings.TrimSpace(data.Stderr))
		}
	}
	add(ch)

	// files: the workspace, which relative paths resolve against.
	ch = doctorCheck{Plane: "files", Needs: "the workspace directory " + ws, Fix: "create the workspace directory or pass --workspace; check that AIO_DEFAULT_USER names an account"}
	if e, ok := c.call(ctx, &ch, "GET", "/v2/fs/stat?path="+url.QueryEscape(ws), ""); ok {
		var data struct {
			IsDirectory bool `json:"is_directory"`
		}
		_ = json.Unmarshal(e.Data, &data)
		if ch.OK = data.IsDirectory; ch.OK {
			ch.Found = "workspace " + ws
		} else {
			ch.Problem = ws + " is not a directory"
		}
	}
	add(ch)

	// terminals: open a PTY shell, then close it.
	ch = doctorCheck{Plane: "terminals", Needs: "a PTY (/dev/ptmx, /dev/pts) and a shell (AIO_BASH_BIN pins it)", Fix: "apt-get install bash; mount devpts on /dev/pts; check that AIO_DEFAULT_USER names an account"}
	if e, ok := c.call(ctx, &ch, "POST", "/v2/pty/sessions", `{}`); ok {
		var data struct {
			SessionID  string `json:"session_id"`
			WorkingDir string `json:"working_dir"`
		}
		_ = json.Unmarshal(e.Data, &data)
		ch.OK, ch.Found = true, "a terminal opened in "+data.WorkingDir
		var closed doctorCheck
		if _, ok := c.call(ctx, &closed, "DELETE", "/v2/pty/sessions/"+url.PathEscape(data.SessionID), ""); !ok {
			ch.Warnings = append(ch.Warnings, "the test terminal did not close: "+closed.Problem)
		}
	}
	add(ch)

	// watch: an inotify watcher on the workspace, then its release.
	ch = doctorCheck{Plane: "watch", Needs: "inotify (Linux) on the workspace", Fix: "raise fs.inotify.max_user_instances and max_user_watches (sysctl)"}
	if e, ok := c.call(ctx, &ch, "POST", "/v2/watch", fmt.Sprintf(`{"path":%q,"recursive":false}`, ws)); ok {
		var data struct {
			WatcherID string `json:"watcher_id"`
		}
		_ = json.Unmarshal(e.Data, &data)
		ch.OK, ch.Found = true, "a watcher on "+ws
		var released doctorCheck
		if _, ok := c.call(ctx, &released, "DELETE", "/v2/watch/"+url.PathEscape(data.WatcherID), ""); !ok {
			ch.Warnings = append(ch.Warnings, "the test watcher was not released: "+released.Problem)
		}
	}
	add(ch)

	// code: the interpreters, as the code plane finds them.
	f := interp.Shared(interp.Pins{Python: d.cfg.PythonBin, Node: d.cfg.NodeBin})
	py, node := f.Python(), f.Node()
	ch = doctorCheck{Plane: "code python", Needs: "python3 that imports ipykernel (AIO_PYTHON_BIN pins it)", Fix: "apt-get install python3 python3-ipykernel"}
	interpCheck(&ch, "python", py)
	add(ch)
	ch = doctorCheck{Plane: "code javascript", Needs: "node (AIO_NODE_BIN pins it)", Fix: "apt-get install nodejs"}
	interpCheck(&ch, "node", node)
	add(ch)
	ch = doctorCheck{Plane: "jupyter kernel", Needs: "the ipykernel of code python (/v1/jupyter, stateful python sessions)", Fix: "apt-get install python3-ipykernel"}
	if ch.OK = py.OK; ch.OK {
		ch.Found = "kernel python3 on " + py.Path
	} else {
		ch.Problem = py.Problem
	}
	add(ch)

	// browser and desktop: the capability probe /v1/capabilities serves.
	pctx, cancel := context.WithTimeout(ctx, doctorStepTimeout)
	caps := d.probe.get(pctx, true)
	cancel()
	ch = doctorCheck{Plane: "browser", Needs: "Chromium with its DevTools port (CDP) open at " + d.cfg.CDPEndpoint,
		Fix: "apt-get install chromium; run aiod --browser (or chromium --headless --remote-debugging-port=9222)"}
	if _, err := launch.FindBrowser(os.Getenv); err != nil {
		// The executable by the rule aiod --browser uses: the problem
		// and the fix name the package.
		ch.Fix = "apt-get install " + launch.BrowserPackage + " (or set " + launch.EnvBrowserExecutable + " to a Chromium)"
		ch.Warnings = append(ch.Warnings, "aiod --browser cannot start: "+err.Error())
	}
	desk := doctorCheck{Plane: "computer-use", Needs: "an X display (Xvfb) with xdotool, xclip and ffmpeg, and the computer-use worker (aiod --desktop runs them with openbox)",
		Fix: "apt-get install xvfb openbox xdotool xclip ffmpeg; run aiod --desktop"}
	deskMissing := desktopMissing(&desk)
	if caps == nil {
		ch.Problem, desk.Problem = "the capability probe did not answer", "the capability probe did not answer"
	} else {
		b := caps.Browser
		ch.OK = b.CDP
		var found []string
		if b.Executable != nil {
			found = append(found, "executable "+*b.Executable)
		}
		if b.CDP {
			found = append(found, "CDP at "+b.CDPEndpoint)
		}
		ch.Found = strings.Join(found, ", ")
		if len(b.Missing) > 0 {
			ch.Problem = "missing " + strings.Join(b.Missing, ", ")
		}
		ch.Warnings = slices.Concat(b.Warnings, ch.Warnings)

		cu := caps.Computer
		desk.OK = cu.Status == statusReady
		found = nil
		if cu.Display != nil {
			found = append(found, "DISPLAY="+*cu.Display)
		}
		for _, tool := range []string{"Xvfb", "xdotool", "xclip", "ffmpeg"} {
			if p := look(tool); p != nil {
				found = append(found, *p)
			}
		}
		desk.Found = strings.Join(found, ", ")
		if len(cu.Missing) > 0 {
			desk.Problem = "missing " + strings.Join(cu.Missing, ", ")
		}
		desk.Warnings = slices.Concat(cu.Warnings, deskMissing)
	}
	add(ch)
	add(desk)

	// mcp: the built-in tools list through /mcp.
	ch = doctorCheck{Plane: "mcp", Needs: "nothing beyond the planes above; EXTRA_MCP_SERVERS upstreams must be loopback HTTP",
		Fix: "check EXTRA_MCP_SERVERS (--mcp-servers)"}
	if n, err := c.mcpTools(ctx); err != nil {
		ch.Problem = err.Error()
	} else {
		ch.OK, ch.Found = true, fmt.Sprintf("%d tools listed", n)
	}
	ch.Warnings = d.MCP().Warnings()
	add(ch)

	r.OK = true
	for _, p := range r.Planes {
		r.OK = r.OK && (p.OK || !p.Required)
	}
	return r
}

// desktopMissing names, as warnings, the programs aiod --desktop runs
// or the worker uses that are not installed, each with its Debian
// package, and narrows ch's fix to those packages.
func desktopMissing(ch *doctorCheck) []string {
	var missing, pkgs []string
	for _, t := range desktools.Missing() {
		missing = append(missing, t.Name+" (package "+t.Package+", for "+t.Use+")")
		pkgs = append(pkgs, t.Package)
	}
	if len(missing) == 0 {
		return nil
	}
	ch.Fix = "apt-get install " + strings.Join(pkgs, " ") + "; run aiod --desktop"
	return []string{"aiod --desktop cannot start: missing " + strings.Join(missing, ", ")}
}

// interpCheck fills a code plane's check from the interpreter discovery.
func interpCheck(ch *doctorCheck, what string, i interp.Interpreter) {
	if ch.OK = i.OK; ch.OK {
		ch.Found = strings.TrimSpace(what + " " + i.Version + " at " + i.Path)
		return
	}
	ch.Problem = i.Problem
	if i.Path != "" {
		ch.Found = what + " at " + i.Path
	}
}

// printDoctor writes the report, one line per plane, then the verdict.
func printDoctor(w io.Writer, r doctorReport) {
	fmt.Fprintf(w, "aiod doctor: %s, workspace %s\n", r.Version, r.Workspace)
	fmt.Fprintf(w, "required planes: %s (a default daemon serves them with only the OS and a shell); the others are optional: their routes answer 503 until installed.\n\n",
		strings.Join(r.Required, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var broken, missing []string
	for _, p := range r.Planes {
		status, kind := "ok", "optional"
		if !p.OK {
			status = "missing"
		}
		if p.Required {
			kind = "required"
		}
		detail := "needs " + p.Needs
		if p.Found != "" {
			detail += "; found " + p.Found
		}
		if !p.OK {
			if p.Problem != "" {
				detail += "; problem: " + p.Problem
			}
			detail += "; install: " + p.Fix
			if p.Required {
				broken = append(broken, p.Plane)
			} else {
				missing = append(missing, p.Plane)
			}
		}
		for _, wn := range p.Warnings {
			detail += "; warning: " + wn
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", status, p.Plane, kind, oneLine(detail))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	switch {
	case len(broken) > 0:
		fmt.Fprintf(w, "result: unusable required plane(s): %s\n", strings.Join(broken, ", "))
	case len(missing) > 0:
		fmt.Fprintf(w, "result: ok; optional plane(s) missing: %s\n", strings.Join(missing, ", "))
	default:
		fmt.Fprintln(w, "result: ok; every plane is usable")
	}
}

// doctorClient sends requests to the daemon's handler in process.
type doctorClient struct {
	h   http.Handler
	key string
}

// doctorEnvelope is the envelope of an answer.
type doctorEnvelope struct {
	Success bool            `json:"success"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Hint    *string         `json:"hint"`
}

// send serves one request and returns the status and body.
func (c *doctorClient) send(ctx context.Context, method, path, body string, hdr ...string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, doctorStepTimeout)
	defer cancel()
	var rd io.Reader = http.NoBody
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1"+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("doctor: %w", err)
	}
	req.RemoteAddr = "127.0.0.1:0"
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := &memResponse{h: http.Header{}}
	c.h.ServeHTTP(w, req)
	return w.code(), w.body.Bytes(), nil
}

// call sends a JSON request; ok is a 200 with success:true. Otherwise
// the check's Problem says what the plane answered.
func (c *doctorClient) call(ctx context.Context, ch *doctorCheck, method, path, body string) (doctorEnvelope, bool) {
	var e doctorEnvelope
	status, b, err := c.send(ctx, method, path, body)
	if err != nil {
		ch.Problem = err.Error()
		return e, false
	}
	if jerr := json.Unmarshal(b, &e); jerr != nil {
		ch.Problem = fmt.Sprintf("%s %s answered %d, not JSON", method, path, status)
		return e, false
	}
	if status != http.StatusOK || !e.Success {
		ch.Problem = fmt.Sprintf("%s %s answered %d: %s", method, strings.SplitN(path, "?", 2)[0], status, e.Message)
		if e.Hint != nil && *e.Hint != "" {
			ch.Problem += " (" + *e.Hint + ")"
		}
		return e, false
	}
	return e, true
}

// mcpTools lists the tools of /mcp and returns how many there are.
func (c *doctorClient) mcpTools(ctx context.Context) (int, error) {
	status, b, err := c.send(ctx, "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
		"Accept", "application/json") // the stateless form aiod documents, not a streamable-HTTP session
	if err != nil {
		return 0, err
	}
	var resp struct {
		Result *struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &resp) != nil {
		return 0, fmt.Errorf("POST /mcp tools/list answered %d", status)
	}
	if resp.Error != nil || resp.Result == nil {
		msg := "no result"
		if resp.Error != nil {
			msg = resp.Error.Message
		}
		return 0, fmt.Errorf("POST /mcp tools/list: %s", msg)
	}
	return len(resp.Result.Tools), nil
}

// memResponse is an in-memory http.ResponseWriter for doctor's requests.
type memResponse struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (m *memResponse) Header() http.Header { return m.h }

func (m *memResponse) WriteHeader(code int) {
	if m.status == 0 {
		m.status = code
	}
}

func (m *memResponse) Write(b []byte) (int, error) {
	m.WriteHeader(http.StatusOK)
	return m.body.Write(b)
}

func (m *memResponse) code() int {
	if m.status == 0 {
		return http.StatusOK
	}
	return m.status
}

// isolationCheck is doctor's isolation line: the sandbox in force (or
// why the one asked for did not start, which makes it a required
// failure) and what this machine allows.
func isolationCheck(d *Daemon, failed error) doctorCheck {
	m := sandbox.Probe()
	allows := fmt.Sprintf("machine: root %t, user namespaces %t, cgroup %s, openat2 %t", m.Root, m.UserNamespaces, m.Cgroup, m.Openat2)
	ch := doctorCheck{Plane: "isolation", Needs: "with --isolation namespaces: root (or unprivileged user namespaces), mount/PID/IPC/UTS namespaces, and cgroups (v2, or v1) for the limits",
		Fix: "run aiod as root or allow unprivileged user namespaces, or pass --isolation none (AIO_ISOLATION=none)"}
	if failed != nil {
		ch.Required, ch.Problem, ch.Found = true, failed.Error(), allows
		return ch
	}
	r := d.sandbox.Report()
	ch.OK, ch.Warnings = true, r.Warnings
	if r.Isolation == sandbox.None {
		ch.Found = "none: processes run on the host as the daemon's account; " + allows
		return ch
	}
	ch.Required = true
	ch.Found = fmt.Sprintf("namespaces (%s), network %s, account %s (uid %d), limits by %s: memory %s, pids %d, cpus %g; %s",
		strings.Join(r.Namespaces, ", "), r.Network, r.User, r.UID, r.Limits, r.Memory, r.Pids, r.CPUs, allows)
	return ch
}
