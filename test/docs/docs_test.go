package docs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// root is the module's root (the folder holding go.mod).
func root(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return d
}

// pages are the markdown files whose examples are run, README first.
func pages(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(dir, "README.md")}, files...)
}

// TestDocsWellFormed parses every page: a malformed block fails here,
// with no binary built.
func TestDocsWellFormed(t *testing.T) {
	for _, p := range pages(t, root(t)) {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(string(src)); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
}

// TestDocsLinks checks that every relative link of the pages names a file
// that exists and, in a markdown file, a heading that exists.
func TestDocsLinks(t *testing.T) {
	for _, p := range pages(t, root(t)) {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range Links(string(src)) {
			file, anchor, _ := strings.Cut(l, "#")
			target := p
			if file != "" {
				target = filepath.Join(filepath.Dir(p), filepath.FromSlash(file))
			}
			body, err := os.ReadFile(target)
			if err != nil {
				t.Errorf("%s: link %s: %v", filepath.Base(p), l, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !Anchors(string(body))[anchor] {
				t.Errorf("%s: link %s: no such heading", filepath.Base(p), l)
			}
		}
	}
}

// up is the shared "a2c up" the examples run against.
type up struct {
	hub, sandbox string // host:port of each
	banner       string // its log up to and including the ready line
	cmd          *exec.Cmd
	done         chan struct{}
}

var (
	hubRE     = regexp.MustCompile(`hub listening addr=(127\.0\.0\.1:\d+)`)
	sandboxRE = regexp.MustCompile(`sandbox_addr=(127\.0\.0\.1:\d+)`)
)

// startUp starts a2c up in dir on free ports and waits (up to 60 s) for
// its ready line; it is stopped with SIGTERM at cleanup.
func startUp(t *testing.T, a2c, dir string, env []string) *up {
	t.Helper()
	args := []string{"up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0"}
	if os.Geteuid() == 0 {
		args = append(args, "--egress", "--machine") // docs/pool.md's network egress and whole machines (CI runs as root)
	}
	cmd := exec.Command(a2c, args...)
	cmd.Dir, cmd.Env = dir, env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	u := &up{cmd: cmd, done: make(chan struct{})}
	ready := make(chan string, 1)
	var logs strings.Builder
	// The reader owns logs until it sends the banner; it then drains the
	// pipe until the process ends, so a2c up never blocks on its stderr.
	go func() {
		defer close(u.done)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if sent {
				continue
			}
			logs.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "a2c up: ready in ") {
				ready <- logs.String()
				sent = true
			}
		}
		if !sent {
			ready <- logs.String()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-u.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-u.done
			t.Error("a2c up did not stop on SIGTERM")
		}
	})
	select {
	case u.banner = <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("a2c up was not ready within 60 s")
	}
	h, s := hubRE.FindStringSubmatch(u.banner), sandboxRE.FindStringSubmatch(u.banner)
	if h == nil || s == nil || !strings.Contains(u.banner, "a2c up: ready in ") {
		t.Fatalf("a2c up did not start; its log:\n%s", u.banner)
	}
	u.hub, u.sandbox = h[1], s[1]
	return u
}

// The documented default addresses, rewritten in commands to the shared
// a2c up's and written back in its output.
const (
	defaultHub     = "127.0.0.1:8000"
	defaultSandbox = "127.0.0.1:18091"
)

// toReal rewrites a documented command to run here.
func (u *up) toReal(cmd string) string {
	r := strings.NewReplacer(
		defaultHub, u.hub, "localhost:8000", u.hub,
		defaultSandbox, u.sandbox, "localhost:18091", u.sandbox,
		"go run ./cmd/a2c", "a2c", "go run ./cmd/aiod", "aiod",
	)
	cmd = r.Replace(cmd)
	if !strings.Contains(cmd, "--server") {
		cmd = agentCmd.ReplaceAllString(cmd, "${0} --server http://"+u.hub)
	}
	if rest, ok := strings.CutPrefix(cmd, "python3 "); ok {
		cmd = "/usr/bin/python3 " + rest
	}
	return cmd
}

// agentCmd finds the agent commands of a2c, whose --server defaults to
// the documented hub address; toReal gives them the real one.
var agentCmd = regexp.MustCompile(`(?:^|[;&|(]\s*)a2c (?:room|tools|call|cancel|put|skills|skill)\b`)

// toDoc writes the real addresses in an output back as the defaults.
func (u *up) toDoc(out string) string {
	return strings.NewReplacer(u.hub, defaultHub, u.sandbox, defaultSandbox).Replace(out)
}

// isUp reports whether a command is the documented "a2c up" itself.
func isUp(cmd string) bool {
	return cmd == "a2c up" || cmd == "go run ./cmd/a2c up"
}

// goMod is the working folder's go.mod: a user's module that requires
// this one, found in the checkout.
const goMod = `module example.com/docs

go 1.26

require github.com/a2c-smcp/a2c-go v0.0.0

replace github.com/a2c-smcp/a2c-go => %s
`

// TestDocs runs every console example of README.md and docs/*.md, in
// order, against one a2c up (see the package documentation).
func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real binaries")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil || exec.Command("/usr/bin/python3", "-c", "import socketio").Run() != nil {
		missingPeer(t, "/usr/bin/python3 with python3-socketio")
	}
	dir := root(t)
	type page struct {
		name   string
		blocks []Block
	}
	var all []page
	for _, p := range pages(t, dir) {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Parse(string(src))
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(p), err)
		}
		rel, _ := filepath.Rel(dir, p)
		all = append(all, page{rel, blocks})
	}

	bin := t.TempDir()
	for _, name := range []string{"a2c", "aiod"} {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, name), "./cmd/"+name)
		build.Dir = dir
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
	}
	work := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "go.mod"), fmt.Appendf(nil, goMod, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	env := commandEnv(bin)
	u := startUp(t, filepath.Join(bin, "a2c"), work, env)

	for _, p := range all {
		for _, b := range p.blocks {
			if b.File != "" {
				dst := filepath.Join(work, filepath.FromSlash(b.File))
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dst, []byte(u.toReal(b.Body)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range b.Commands {
				t.Run(fmt.Sprintf("%s:%d", p.name, c.Line), func(t *testing.T) {
					var out string
					code := 0
					if isUp(c.Text) {
						out = u.banner
					} else {
						out, code = run(t, u.toReal(c.Text), work, env)
					}
					out = u.toDoc(out)
					if err := Match(c.Want, out); err != nil {
						t.Errorf("%s:%d: $ %s\n%v\noutput:\n%s", p.name, c.Line, c.Text, err, out)
					}
					if code != c.Exit {
						t.Errorf("%s:%d: $ %s\nexit status %d, want %d; output:\n%s", p.name, c.Line, c.Text, code, c.Exit, out)
					}
				})
			}
		}
	}
}

// commandEnv is the environment examples run in: the built binaries
// first on PATH, and no credential or exporter setting of the caller's.
func commandEnv(bin string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || k == "GOFLAGS" || k == "GOPROXY" || k == "A2C_TOKEN" || k == "AIO_API_KEY" || k == "SANDBOX_API_KEY" || strings.HasPrefix(k, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	// GOFLAGS=-mod=mod lets "go run" in the working folder's module add
	// the requirements it inherits from this one; GOPROXY=off keeps it to
	// the module cache the build of this module filled.
	return append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "GOFLAGS=-mod=mod", "GOPROXY=off")
}

// run runs one command with bash in dir, standard output and error on one
// pipe (their order as a terminal shows it), within 2 minutes.
func run(t *testing.T, command, dir string, env []string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", command)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case ctx.Err() != nil:
		t.Fatalf("$ %s: no end within 2 minutes; output:\n%s", command, out)
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	default:
		t.Fatalf("$ %s: %v", command, err)
	}
	return "", 0
}

// missingPeer fails the test under A2C_REQUIRE_PEERS=1 (make test) and
// skips it otherwise, as the interop suites do.
func missingPeer(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("A2C_REQUIRE_PEERS") == "1" {
		t.Fatalf("test peer missing: %s (run make test, which installs it)", what)
	}
	t.Skipf("test peer missing: %s (run make test to install it)", what)
}
