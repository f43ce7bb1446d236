package commands

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestDaemonSecretsNotInherited(t *testing.T) {
	t.Setenv("AIO_API_KEY", "secret-aio-key")
	t.Setenv("SANDBOX_API_KEY", "secret-sandbox-key")
	t.Setenv("AIOD_TEST_HIDDEN", "secret-config")
	t.Setenv("AIOD_TEST_KEPT", "visible")
	h := newHarness(t, Config{HideEnv: []string{"AIOD_TEST_HIDDEN"}}, nil)
	for _, path := range []string{"/v2/commands", "/v1/bash/exec"} {
		var d execData
		h.OK("POST", path, map[string]any{"command": "env"}, &d)
		out := str(d.Stdout)
		for _, secret := range []string{"AIO_API_KEY", "SANDBOX_API_KEY", "secret-", "AIOD_TEST_HIDDEN"} {
			if strings.Contains(out, secret) {
				t.Fatalf("%s: env shows %s:\n%s", path, secret, out)
			}
		}
		if !strings.Contains(out, "AIOD_TEST_KEPT=visible\n") {
			t.Fatalf("%s: the rest of the environment is lost:\n%s", path, out)
		}
	}
	// A request may still set one for its own command.
	if d := h.run(map[string]any{"command": "echo $AIO_API_KEY", "env": map[string]string{"AIO_API_KEY": "mine"}}); str(d.Stdout) != "mine\n" {
		t.Fatalf("%+v", d)
	}
}

// procsWithArgv lists the live (non-zombie) processes whose argv is
// exactly args.
func procsWithArgv(args ...string) []procInfo {
	want := strings.Join(args, "\x00") + "\x00"
	var out []procInfo
	t := scanProcs()
	for pid, p := range t.Procs {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && string(b) == want && p.State != 'Z' {
			out = append(out, p)
		}
	}
	return out
}

// detached waits for the one live process running argv, checks it has
// left the daemon's session, and returns it.
func detached(t *testing.T, args ...string) procInfo {
	t.Helper()
	var p procInfo
	self, _ := child.ReadProc(selfPid)
	// Between its fork and its setsid() the child is still in the
	// daemon's session: wait until it has left.
	eventually(t, 5*time.Second, strings.Join(args, " ")+" to start detached", func() bool {
		ps := procsWithArgv(args...)
		if len(ps) == 1 {
			p = ps[0]
		}
		return len(ps) == 1 && p.SID != self.SID && p.PGID != selfPgid
	})
	return p
}

// gone waits until p has ended and its zombie, if it was the daemon's,
// has been reaped.
func gone(t *testing.T, p procInfo) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		q, ok := child.ReadProc(p.PID)
		if !ok || q.Start != p.Start {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("pid %d has not ended and been reaped: %+v (daemon %d, group %d)", p.PID, q, selfPid, selfPgid)
		}
	}
}

// noOrphanZombies waits until no zombie reparented to the test process
// is left unreaped, in several looks in a row (one look may fall between
// a death and its SIGCHLD).
func noOrphanZombies(t *testing.T) {
	t.Helper()
	clean := 0
	eventually(t, 5*time.Second, "orphaned zombies to be reaped", func() bool {
		for _, p := range scanProcs().Procs {
			if p.State == 'Z' && p.PPID == selfPid && p.PGID != selfPgid {
				clean = 0
				return false
			}
		}
		clean++
		return clean >= 5
	})
}

func TestDetachedChildKilled(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	h := newHarness(t, Config{}, func(e *Engine) { e.killGrace = 300 * time.Millisecond; e.drainGrace = 50 * time.Millisecond })

	t.Run("kill", func(t *testing.T) {
		d := h.run(map[string]any{"command": "setsid sleep 89.1 & sleep 88", "mode": "async"})
		p := detached(t, "sleep", "89.1")
		h.OK("POST", "/v2/commands/"+d.CommandID+"/kill", map[string]any{"signal": "SIGTERM"}, nil)
		if o := h.waitDone(d.CommandID); code(o.Command.ExitCode) != "-1" {
			t.Fatalf("%+v", o.Command)
		}
		gone(t, p)
	})
	t.Run("hard_timeout", func(t *testing.T) {
		d := h.run(map[string]any{"command": "setsid sleep 89.2 & sleep 88", "mode": "async", "hard_timeout": 1})
		p := detached(t, "sleep", "89.2")
		if o := h.waitDone(d.CommandID); o.Command.Status != StatusTimedOut {
			t.Fatalf("%+v", o.Command)
		}
		gone(t, p)
	})
	t.Run("session close", func(t *testing.T) {
		h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "tree"}, nil)
		h.run(map[string]any{"command": "setsid sleep 89.3 & sleep 88", "mode": "async", "session": "tree"})
		p := detached(t, "sleep", "89.3")
		h.OK("DELETE", "/v2/commands/sessions/tree", nil, nil)
		gone(t, p)
	})
	t.Run("session close after the shell exited", func(t *testing.T) {
		// The tracker records the detached child while its shell runs; the
		// session close finds it after the shell has gone.
		h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "left"}, nil)
		d := h.run(map[string]any{"command": "setsid sleep 89.4 & sleep 2.5", "session": "left"})
		if d.Status != StatusCompleted {
			t.Fatalf("%+v", d)
		}
		p := detached(t, "sleep", "89.4")
		if p.PPID != selfPid {
			t.Fatalf("the orphan was not reparented to the daemon: %+v", p)
		}
		h.OK("DELETE", "/v2/commands/sessions/left", nil, nil)
		gone(t, p)
	})
	t.Run("session close after an at-once orphan", func(t *testing.T) {
		// The shell exits at once, before any tracker could see its
		// child: the child is found by the command id it carries.
		h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "quick"}, nil)
		d := h.run(map[string]any{"command": "setsid sleep 89.7 &", "session": "quick"})
		if d.Status != StatusCompleted {
			t.Fatalf("%+v", d)
		}
		p := detached(t, "sleep", "89.7")
		h.OK("DELETE", "/v2/commands/sessions/quick", nil, nil)
		gone(t, p)
	})
	t.Run("Close", func(t *testing.T) {
		h.run(map[string]any{"command": "setsid sleep 89.5 & sleep 88", "mode": "async"})
		h.run(map[string]any{"command": "setsid sleep 89.6 &"}) // an orphan at once
		p, q := detached(t, "sleep", "89.5"), detached(t, "sleep", "89.6")
		closePlane(t, h.p)
		gone(t, p)
		gone(t, q)
	})
	noOrphanZombies(t)
}

// TestOrphanZombiesReaped: processes a command detached (double fork,
// setsid) are reparented to the daemon, a subreaper; when they die the
// daemon reaps them. Each is seen alive first, then killed by the test,
// and must vanish from /proc: an unreaped zombie stays there.
func TestOrphanZombiesReaped(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	h := newHarness(t, Config{}, nil)
	t.Cleanup(func() { closePlane(t, h.p) })
	d := h.run(map[string]any{"command": "for i in 1 2 3; do (setsid sleep 1000.5$i &); (sleep 1000.6$i &); done"})
	if code(d.ExitCode) != "0" {
		t.Fatalf("%+v", d)
	}
	var orphans []procInfo
	for _, i := range []string{"1", "2", "3"} {
		for _, arg := range []string{"1000.5" + i, "1000.6" + i} {
			p := waitProc(t, "sleep", arg)
			eventually(t, 10*time.Second, "sleep "+arg+" to be reparented to the daemon", func() bool {
				q, ok := child.ReadProc(p.PID)
				return ok && q.Start == p.Start && q.PPID == selfPid
			})
			orphans = append(orphans, p)
		}
	}
	for _, p := range orphans {
		if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range orphans {
		gone(t, p)
	}
	noOrphanZombies(t)
}

func TestOwnAccountNeedsNoSwitch(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	h := newHarness(t, Config{}, nil)
	d := h.run(map[string]any{"command": "id -u; echo $USER", "user": u.Username})
	if str(d.Stdout) != u.Uid+"\n"+u.Username+"\n" {
		t.Fatalf("%+v", d)
	}
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "own", "user": u.Username}, nil)
	if os.Getuid() == 0 {
		// Root is the daemon's own account here: no credential switch.
		if d = h.run(map[string]any{"command": "id -u", "user": "root"}); str(d.Stdout) != "0\n" {
			t.Fatalf("%+v", d)
		}
	} else {
		msg := h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "true", "user": "root"})
		if !strings.Contains(msg, "only root can change identity") {
			t.Fatalf("%q", msg)
		}
	}
}

func TestMissingCwd(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const missing = "cannot use cwd /nonexistent: No such file or directory (os error 2)"
	notDir := "cannot use cwd " + file + ": Not a directory (os error 20)"
	for _, c := range []struct {
		path string
		body map[string]any
		want string
	}{
		{"/v2/commands", map[string]any{"command": "true", "cwd": "/nonexistent"}, missing},
		{"/v2/commands", map[string]any{"command": "true", "cwd": file}, notDir},
		{"/v2/commands", map[string]any{"command": "true", "cwd": "/nonexistent", "shell": "none"}, missing},
		{"/v1/bash/exec", map[string]any{"command": "true", "exec_dir": "/nonexistent"}, missing},
		{"/v2/commands/sessions", map[string]any{"cwd": "/nonexistent"}, missing},
		{"/v1/bash/sessions/create", map[string]any{"exec_dir": "/nonexistent"}, missing},
	} {
		if msg := h.Fails(400, "POST", c.path, c.body); msg != c.want {
			t.Errorf("%s %v: %q, want %q", c.path, c.body, msg, c.want)
		}
	}
	// A session's directory removed after its creation.
	dir := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "s", "cwd": dir}, nil)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if msg := h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "true", "session": "s"}); msg != "cannot use cwd "+dir+": No such file or directory (os error 2)" {
		t.Errorf("%q", msg)
	}
}

// metricValue reads one series of a gathered registry: a counter's or a
// gauge's value, or a histogram's sample count.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
				}
				if !found {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, Config{Registerer: reg}, nil)
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "m"}, nil)
	h.run(map[string]any{"command": "exit 3", "session": "m"})
	h.run(map[string]any{"command": "true"})
	h.run(map[string]any{"command": "sleep 30", "hard_timeout": 0.1})
	d := h.run(map[string]any{"command": "sleep 30", "mode": "async"})
	h.OK("POST", "/v2/commands/"+d.CommandID+"/kill", nil, nil)
	h.waitDone(d.CommandID)
	h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "/no/such/program", "shell": "none"})
	h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "true", "cwd": "/nonexistent"})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"command_exec_total", []string{"status", "completed"}, 3}, // exit 3, true, and the kill
		{"command_exec_total", []string{"status", "timed_out"}, 1},
		{"command_exec_total", []string{"status", "error"}, 2},
		{"command_exec_duration_seconds", nil, 4},
		{"command_sessions", nil, float64(len(h.p.e.Sessions()))},
	} {
		if got := metricValue(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	h.OK("DELETE", "/v2/commands/sessions/m", nil, nil)
	if got, want := metricValue(t, reg, "command_sessions"), float64(len(h.p.e.Sessions())); got != want || want < 1 {
		t.Errorf("command_sessions after a close = %v", got)
	}
	// A second plane on the same registry shares the series.
	p2 := New(Config{Registerer: reg, Workspace: t.TempDir()})
	defer closePlane(t, p2)
	if _, err := p2.Engine().Run(context.Background(), Request{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the second plane's count", func() bool {
		return metricValue(t, reg, "command_exec_total", "status", "completed") == 4
	})
}

func TestSyncClientGoneKills(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	for i, path := range []string{"/v2/commands", "/v1/bash/exec"} {
		session := "dc" + strconv.Itoa(i)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		field := map[bool]string{true: "session", false: "session_id"}[i == 0]
		body, _ := json.Marshal(map[string]any{"command": "sleep 30", field: session})
		h.OK("POST", "/v2/commands/sessions", map[string]any{"id": session}, nil)
		req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := h.srv.Client().Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("%s: answered %d before the command ended", path, resp.StatusCode)
		}
		cancel()
		var c *Command
		eventually(t, 5*time.Second, "the command to be killed", func() bool {
			c, _ = h.p.e.Latest(session, false)
			if c == nil {
				return false
			}
			st, ec := c.State()
			return st == StatusCompleted && ec != nil && *ec == -1
		})
	}
	// Returned as running by timeout, or async: the client may go. By
	// the time a later disconnect has been acted on, theirs have been.
	d := h.run(map[string]any{"command": "sleep 30", "timeout": 0.1})
	a := h.run(map[string]any{"command": "sleep 30", "mode": "async"})
	h.disconnectedAfter()
	for _, id := range []string{d.CommandID, a.CommandID} {
		var o outputData
		h.OK("GET", "/v2/commands/"+id, nil, &o)
		if o.Command.Status != StatusRunning {
			t.Fatalf("%+v", o.Command)
		}
	}
}

func TestStdinNotAccepting(t *testing.T) {
	h := newHarness(t, Config{}, func(e *Engine) { e.stdinTimeout = 200 * time.Millisecond })
	d := h.run(map[string]any{"command": "sleep 30", "mode": "async"})
	input := strings.Repeat("x", 1<<20)
	msg := h.Fails(400, "POST", "/v2/commands/"+d.CommandID+"/stdin", map[string]any{"input": input})
	re := regexp.MustCompile(`^stdin of command ` + d.CommandID + ` is not accepting input \(wrote (\d+) of 1048576 bytes\)$`)
	m := re.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("%q", msg)
	}
	if n, _ := strconv.Atoi(m[1]); n <= 0 || n >= 1<<20 {
		t.Fatalf("%q", msg)
	}
}

func TestNoGoErrorText(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	goText := regexp.MustCompile(`fork/exec|exec: |0x[0-9a-f]+|i/o timeout|: no such file|%!`)
	for _, body := range []map[string]any{
		{"command": "/no/such/program", "shell": "none"},
		{"command": "no-such-program-xyz", "shell": "none"},
		{"command": "true", "cwd": "/nonexistent"},
	} {
		msg := h.Fails(400, "POST", "/v2/commands", body)
		if goText.MatchString(msg) || !strings.Contains(msg, "(os error 2)") {
			t.Errorf("%v: %q", body, msg)
		}
	}
	if msg := h.Fails(400, "POST", "/v2/commands", map[string]any{"command": "/etc/passwd", "shell": "none"}); msg != "failed to start /etc/passwd: Permission denied (os error 13)" {
		t.Errorf("%q", msg)
	}
}

func TestSignalLogHasValues(t *testing.T) {
	var buf bytes.Buffer
	h := newHarness(t, Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))}, nil)
	h.p.e.kill(os.Getpid(), syscall.Signal(1000)) // EINVAL, harmlessly
	line := buf.String()
	if !strings.Contains(line, "errno=22") || !strings.Contains(line, `error="invalid argument"`) || strings.Contains(line, "0x") {
		t.Fatalf("%s", line)
	}
}

func TestNDJSONNotHTMLEscaped(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "a<b>&c"}, nil)
	body, _ := json.Marshal(map[string]any{"command": "true", "session": "a<b>&c"})
	req, _ := http.NewRequest("POST", h.srv.URL+"/v2/commands", bytes.NewReader(body))
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"session_id":"a<b>&c"`) {
		t.Fatalf("%d %q", resp.StatusCode, sc.Text())
	}
}
