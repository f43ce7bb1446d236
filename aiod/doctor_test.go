package aiod

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// doctorOn runs the checks on a daemon built from cfg.
func doctorOn(t *testing.T, cfg Config) map[string]doctorCheck {
	t.Helper()
	d, err := New(pinPorts(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Shutdown(context.Background()) })
	r := doctor(context.Background(), d)
	got := map[string]doctorCheck{}
	for _, p := range r.Planes {
		got[p.Plane] = p
	}
	var broken bool
	for _, p := range doctorRequired {
		broken = broken || !got[p].OK
	}
	if r.OK == broken {
		t.Errorf("report ok %v with required planes broken %v", r.OK, broken)
	}
	return got
}

func TestDoctorPlanes(t *testing.T) {
	ws := t.TempDir()
	got := doctorOn(t, Config{Workspace: ws, APIKey: "k"}) // the key is sent in process
	want := []string{"commands", "files", "terminals", "watch", "code python", "code javascript", "jupyter kernel", "browser", "computer-use", "mcp"}
	if len(got) != len(want) {
		t.Errorf("planes: %v", got)
	}
	for _, p := range want {
		c, ok := got[p]
		if !ok {
			t.Errorf("no check of %s", p)
			continue
		}
		if c.Needs == "" || (!c.OK && c.Fix == "") {
			t.Errorf("%s: %+v", p, c)
		}
		if c.Required != (p == "commands" || p == "files" || p == "terminals" || p == "watch") {
			t.Errorf("%s: required %v", p, c.Required)
		}
	}
	for _, p := range doctorRequired {
		if !got[p].OK {
			t.Errorf("%s unusable on the test machine: %+v", p, got[p])
		}
	}
	if !strings.HasPrefix(got["commands"].Found, "runs commands with /") || got["files"].Found != "workspace "+ws ||
		got["terminals"].Found != "a terminal opened in "+ws || got["watch"].Found != "a watcher on "+ws {
		t.Errorf("found: %q %q %q %q", got["commands"].Found, got["files"].Found, got["terminals"].Found, got["watch"].Found)
	}
	if got["computer-use"].OK || !strings.Contains(got["computer-use"].Fix, "apt-get install xvfb") {
		t.Errorf("computer-use: %+v", got["computer-use"])
	}
	if b := got["browser"]; !b.OK && b.Fix != "apt-get install chromium; run aiod --browser (or chromium --headless --remote-debugging-port=9222)" {
		t.Errorf("browser: %+v", b)
	}
}

// TestDoctorMissingPrograms: a Chromium or a desktop program that is not
// installed is named with the Debian package to install.
func TestDoctorMissingPrograms(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // nothing on PATH
	t.Setenv("BROWSER_EXECUTABLE_PATH", "/nonexistent/chromium")
	got := doctorOn(t, Config{Workspace: t.TempDir(), BashBin: "/bin/bash"})
	b := got["browser"]
	if b.OK || b.Fix != "apt-get install chromium (or set BROWSER_EXECUTABLE_PATH to a Chromium)" ||
		!slices.Contains(b.Warnings, "aiod --browser cannot start: no Chromium executable (BROWSER_EXECUTABLE_PATH=/nonexistent/chromium is not an executable file); install it with: apt-get install chromium") {
		t.Errorf("browser: %+v", b)
	}
	d := got["computer-use"]
	if d.OK || d.Fix != "apt-get install xvfb openbox xdotool xclip ffmpeg; run aiod --desktop" ||
		!slices.Contains(d.Warnings, "aiod --desktop cannot start: missing Xvfb (package xvfb, for the X display), openbox (package openbox, for the window manager (window activation needs one)), xdotool (package xdotool, for mouse, keyboard and window actions), xclip (package xclip, for the clipboard), ffmpeg (package ffmpeg, for screen recording)") {
		t.Errorf("computer-use: %+v", d)
	}
}

func TestDoctorBrokenRequired(t *testing.T) {
	// No such account: commands and terminals cannot run as it.
	got := doctorOn(t, Config{Workspace: t.TempDir(), DefaultUser: "no-such-user-aiod"})
	for _, p := range []string{"commands", "terminals"} {
		if c := got[p]; c.OK || !strings.Contains(c.Problem, "no-such-user-aiod") {
			t.Errorf("%s with a missing default account: %+v", p, c)
		}
	}
	// No workspace: files says so.
	missing := filepath.Join(t.TempDir(), "gone")
	got = doctorOn(t, Config{Workspace: missing})
	if c := got["files"]; c.OK || !strings.HasPrefix(c.Problem, "GET /v2/fs/stat answered 404: ") || !strings.HasPrefix(c.Fix, "create the workspace directory or pass --workspace") {
		t.Errorf("files without a workspace: %+v", c)
	}
}

func TestPrintDoctor(t *testing.T) {
	r := doctorReport{Version: "aio-daemon 0.9.2+abc", Workspace: "/w", Required: []string{"commands"}, Planes: []doctorCheck{
		{Plane: "commands", Required: true, OK: true, Needs: "a shell", Found: "runs commands with /bin/bash"},
		{Plane: "code javascript", Needs: "node", Problem: "No node", Fix: "apt-get install nodejs", Warnings: []string{"w1"}},
	}}
	var b bytes.Buffer
	printDoctor(&b, r)
	want := "aiod doctor: aio-daemon 0.9.2+abc, workspace /w\n" +
		"required planes: commands (a default daemon serves them with only the OS and a shell); the others are optional: their routes answer 503 until installed.\n\n" +
		"ok       commands         required  needs a shell; found runs commands with /bin/bash\n" +
		"missing  code javascript  optional  needs node; problem: No node; install: apt-get install nodejs; warning: w1\n\n" +
		"result: ok; optional plane(s) missing: code javascript\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	r.Planes[0].OK, r.Planes[0].Problem, r.Planes[0].Fix = false, "none", "apt-get install bash"
	b.Reset()
	printDoctor(&b, r)
	if !strings.HasSuffix(b.String(), "\nresult: unusable required plane(s): commands\n") {
		t.Errorf("broken:\n%s", b.String())
	}
}

// TestDoctorExitCodes: Main's doctor exits 0 when the required planes
// work and 1 when one does not; --json prints the report.
func TestDoctorExitCodes(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"doctor", "--json", "--workspace", t.TempDir()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	var r doctorReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || !r.OK || len(r.Planes) != 11 || r.Planes[10].Plane != "isolation" || !r.Planes[10].OK || r.Version != versionLine() {
		t.Errorf("json report: %v %s", err, out.String())
	}
	out.Reset()
	missing := filepath.Join(t.TempDir(), "gone")
	if code := Main([]string{"doctor", "--workspace", missing}, &out, &errb); code != 1 ||
		!strings.Contains(out.String(), "\nmissing  files ") || !strings.HasSuffix(out.String(), "result: unusable required plane(s): commands, files, terminals, watch\n") {
		t.Errorf("exit %d\n%s", code, out.String())
	}
}
