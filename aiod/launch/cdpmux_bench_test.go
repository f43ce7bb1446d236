package launch

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/browser"
)

// The browser plane's latency over Chromium's DevTools pipe (through the
// CDPMux, dialed in process) beside a TCP DevTools port (how aiod
// --browser ran Chromium before): a screenshot and a navigation, each
// through the plane's HTTP routes.
//
//	go test ./aiod/launch -run '^$' -bench PlaneOver -benchtime 200x

// benchChromium starts a headless Chromium with DevTools on the pipe
// (pipe true, served by a new CDPMux) or on a random TCP port, and
// returns the browser plane's routes driving it.
func benchChromium(b *testing.B, pipe bool) http.Handler {
	b.Helper()
	br, err := FindBrowser(os.Getenv)
	if err != nil {
		b.Skip(err)
	}
	prof := b.TempDir()
	args := BrowserArgs(BrowserOptions{Profile: prof})
	var cfg browser.Config
	cmd := exec.Command(br.Path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if pipe {
		toR, toW, _ := os.Pipe()
		fromR, fromW, _ := os.Pipe()
		cmd.Args = append(cmd.Args, args...)
		cmd.ExtraFiles = []*os.File{toR, fromW}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		_ = toR.Close()
		_ = fromW.Close()
		m := NewCDPMux(nil)
		m.Attach(toW, fromR)
		b.Cleanup(m.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for m.Ready(ctx) != nil && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		cfg = browser.Config{CDPEndpoint: "http://devtools.pipe", Dial: m.Dial}
	} else {
		for _, a := range args {
			if a == "--remote-debugging-pipe" {
				a = "--remote-debugging-port=0"
			}
			cmd.Args = append(cmd.Args, a)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		var port string
		for deadline := time.Now().Add(30 * time.Second); port == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if s, err := os.ReadFile(filepath.Join(prof, "DevToolsActivePort")); err == nil {
				port, _, _ = strings.Cut(string(s), "\n")
			}
		}
		cfg = browser.Config{CDPEndpoint: "http://127.0.0.1:" + port}
	}
	b.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	p := browser.New(cfg)
	b.Cleanup(func() { _ = p.Close(context.Background()) })
	mux := http.NewServeMux()
	p.Mount(mux)
	return mux
}

func benchPage(b *testing.B) string {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>bench</title><h1>Hello</h1><p>"+strings.Repeat("text ", 400)+"</p>")
	}))
	b.Cleanup(page.Close)
	return page.URL
}

func serve(b *testing.B, h http.Handler, method, path, body string) {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	h.ServeHTTP(w, r)
	if w.Code != 200 {
		b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body.String()[:min(w.Body.Len(), 200)])
	}
}

func BenchmarkPlaneOver(b *testing.B) {
	for _, via := range []string{"tcp", "pipe"} {
		h := benchChromium(b, via == "pipe")
		u := benchPage(b)
		serve(b, h, "POST", "/v2/browser/navigate", `{"url":"`+u+`"}`)
		b.Run("screenshot/"+via, func(b *testing.B) {
			for b.Loop() {
				serve(b, h, "GET", "/v2/browser/screenshot", "")
			}
		})
		b.Run("navigate/"+via, func(b *testing.B) {
			for b.Loop() {
				serve(b, h, "POST", "/v2/browser/navigate", `{"url":"`+u+`"}`)
			}
		})
	}
}
