package launch

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestFindBrowser(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "chrome")
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env string
		want      Browser
		err       string
	}{
		{"env", exe, Browser{Path: exe, Source: SourceEnv}, ""},
		{"env-missing", "/nonexistent/chromium", Browser{}, "no Chromium executable (BROWSER_EXECUTABLE_PATH=/nonexistent/chromium is not an executable file); install it with: apt-get install chromium"},
		{"env-not-executable", plain, Browser{}, "BROWSER_EXECUTABLE_PATH=" + plain + " is not an executable file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindBrowser(func(k string) string { return map[string]string{EnvBrowserExecutable: tc.env}[k] })
			var me *MissingError
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &me) || me.Package != "chromium") {
				t.Errorf("err = %v, want a MissingError with %q", err, tc.err)
			}
			if tc.err == "" && (err != nil || got != tc.want) {
				t.Errorf("FindBrowser = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestBrowserArgs(t *testing.T) {
	for _, tc := range []struct {
		o           BrowserOptions
		has, hasNot []string
	}{
		{BrowserOptions{Profile: "/p"},
			[]string{"--headless=new", "--no-sandbox", "--remote-debugging-pipe", "--user-data-dir=/p", "--window-size=1280,720", "--no-first-run"},
			[]string{"--disable-dev-shm-usage", "--remote-debugging-port", "--remote-debugging-address"}},
		{BrowserOptions{Profile: "/p", Headful: true, NoDevShm: true},
			[]string{"--disable-dev-shm-usage", "--remote-debugging-pipe"}, []string{"--headless=new"}},
	} {
		args := BrowserArgs(tc.o)
		joined := " " + strings.Join(args, " ") + " "
		for _, a := range tc.has {
			if !strings.Contains(joined, " "+a+" ") {
				t.Errorf("%+v: %q lacks %s", tc.o, args, a)
			}
		}
		for _, a := range tc.hasNot {
			if strings.Contains(joined, " "+a+" ") {
				t.Errorf("%+v: %q has %s", tc.o, args, a)
			}
		}
		if args[len(args)-1] != "about:blank" {
			t.Errorf("last argument %q, want about:blank", args[len(args)-1])
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// TestSupervisor: a program that dies is started again (a new pid), and
// Stop ends it with the helper it forked (its process group).
func TestSupervisor(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ready")
	s, err := Start(context.Background(), Program{Name: "sh", Grace: time.Second,
		Command: func() (*exec.Cmd, error) {
			// A helper in the same group, then wait.
			return exec.Command("/bin/sh", "-c", "sleep 300 & touch "+mark+"; wait"), nil
		},
		Ready: func(context.Context) error {
			_, err := os.Stat(mark)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	first := s.PID()
	_ = os.Remove(mark)
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.PID() == first || !s.running() {
		if time.Now().After(deadline) {
			t.Fatal("not restarted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s.Restarts() != 1 {
		t.Errorf("restarts %d, want 1", s.Restarts())
	}
	pid := s.PID()
	for time.Now().Before(deadline) {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for time.Now().Before(deadline) {
		if !errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		return
	}
	t.Errorf("process group %d outlived Stop (alive %v)", pid, alive(pid))
}

// TestStartFails: a program that exits before it is ready fails Start
// with its output.
func TestStartFails(t *testing.T) {
	_, err := Start(context.Background(), Program{Name: "sh",
		Command: func() (*exec.Cmd, error) { return exec.Command("/bin/sh", "-c", "echo cannot start >&2; exit 3"), nil },
		Ready:   func(context.Context) error { return errors.New("no") }})
	if err == nil || !strings.Contains(err.Error(), "sh exited before it was ready (exit status 3): cannot start") {
		t.Errorf("err = %v", err)
	}
}

// TestCDPProxy: the prefix goes, api_key and the client's credentials
// and Origin are not forwarded, Host is the endpoint's own, and the
// answer's WebSocket URL is the one the client reaches through the proxy.
func TestCDPProxy(t *testing.T) {
	var got *http.Request
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = w.Write([]byte(`{"Browser":"Chrome/156","webSocketDebuggerUrl":"ws://` + r.Host + `/devtools/browser/abc-1"}`))
	}))
	defer back.Close()
	var nd net.Dialer
	p, err := NewCDPProxy(back.URL, nd.DialContext)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	req, _ := http.NewRequest(http.MethodGet, front.URL+"/cdp/json/version?api_key=K&x=1", nil)
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("X-Api-Key", "K")
	req.Header.Set("Authorization", "Bearer K")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"Browser":"Chrome/156","webSocketDebuggerUrl":"ws://` + strings.TrimPrefix(front.URL, "http://") + `/cdp/devtools/browser/abc-1?api_key=K"}`
	if string(body) != want || resp.ContentLength != int64(len(want)) {
		t.Errorf("answer %q (length %d), want %q", body, resp.ContentLength, want)
	}
	if resp.StatusCode != 200 || got.URL.Path != "/json/version" || got.URL.RawQuery != "x=1" || got.Host != strings.TrimPrefix(back.URL, "http://") ||
		got.Header.Get("Origin") != "" || got.Header.Get("X-Api-Key") != "" || got.Header.Get("Authorization") != "" {
		t.Errorf("forwarded %d: path %q query %q host %q headers %v", resp.StatusCode, got.URL.Path, got.URL.RawQuery, got.Host, got.Header)
	}
	if path, err := p.BrowserPath(context.Background()); err != nil || path != "/devtools/browser/abc-1" {
		t.Errorf("BrowserPath = %q, %v", path, err)
	}
	if resp, err := http.Get(front.URL + "/other"); err != nil || resp.StatusCode != 404 {
		t.Errorf("/other: %v %v, want 404", resp, err)
	}
}

// TestCDPProxyLargeAnswer: a /json answer too large to rewrite is passed
// on whole and unchanged, never cut.
func TestCDPProxyLargeAnswer(t *testing.T) {
	big := `[{"url":"` + strings.Repeat("a", maxJSONAnswer) + `","webSocketDebuggerUrl":"ws://127.0.0.1:1/devtools/page/X"}]`
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, big)
	}))
	defer back.Close()
	var nd net.Dialer
	p, err := NewCDPProxy(back.URL, nd.DialContext)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	resp, err := http.Get(front.URL + "/cdp/json/list")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != big {
		t.Errorf("got %d bytes (%v), want the %d bytes unchanged", len(body), err, len(big))
	}
}

// TestSupervisorForgetsReapedPID: once an instance is reaped and its
// restart fails, the supervisor holds no pid, so no later signal (the
// next failed restart, Stop) reaches a process that reused the id.
func TestSupervisorForgetsReapedPID(t *testing.T) {
	var starts atomic.Int32
	s, err := Start(context.Background(), Program{Name: "sh", Grace: time.Second,
		Command: func() (*exec.Cmd, error) {
			if starts.Add(1) > 1 {
				return nil, errors.New("no second start")
			}
			return exec.Command("/bin/sh", "-c", "sleep 0.2"), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if s.PID() == 0 {
		t.Fatal("no pid while running")
	}
	deadline := time.Now().Add(10 * time.Second)
	for starts.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no restart attempt")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pid := s.PID(); pid != 0 {
		t.Errorf("PID() = %d after the instance was reaped and its restart failed, want 0", pid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStartDisplayClosesPipeOnStartFailure: a start that fails before
// Xvfb runs closes both ends of its -displayfd pipe (20 tries used to
// leave 40 descriptors behind).
func TestStartDisplayClosesPipeOnStartFailure(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Xvfb"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	countFDs := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd:", err)
		}
		return len(ents)
	}
	before := countFDs()
	failing := func(*exec.Cmd) func() error { return func() error { return errors.New("refused") } }
	_, _, err := StartDisplay(context.Background(), DisplayOptions{Width: 64, Height: 64, Start: failing})
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("StartDisplay = %v, want the start's error", err)
	}
	if after := countFDs(); after > before {
		t.Errorf("%d descriptors open after, %d before: the pipes leaked", after, before)
	}
}
