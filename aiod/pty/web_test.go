package pty

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The embedded emulator is the pinned npm build, byte for byte: every
// file under web/vendor is listed in its SHA256SUMS with the sum of the
// embedded copy, and the versions recorded there are the ones
// scripts/xterm.sh pins. A hand edit fails here; scripts/xterm.sh
// --check compares with the registry's tarballs.
func TestVendoredXterm(t *testing.T) {
	sums, err := fs.ReadFile(webFiles, "vendor/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	versions := map[string]string{}
	header := regexp.MustCompile(`^# (@xterm/[a-z-]+)@(\S+) tarball-sha512 [0-9a-f]{128}$`)
	sc := bufio.NewScanner(strings.NewReader(string(sums)))
	for sc.Scan() {
		line := sc.Text()
		if m := header.FindStringSubmatch(line); m != nil {
			versions[m[1]] = m[2]
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS: %q", line)
		}
		b, err := fs.ReadFile(webFiles, "vendor/"+name)
		if err != nil {
			t.Errorf("%s is listed but not embedded: %v", name, err)
			continue
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("vendor/%s differs from the pinned build (run scripts/xterm.sh)", name)
		}
		listed[name] = true
	}
	err = fs.WalkDir(webFiles, "vendor", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != "vendor/SHA256SUMS" && !listed[strings.TrimPrefix(p, "vendor/")] {
			t.Errorf("%s is embedded but not in SHA256SUMS", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"xterm/xterm.js", "xterm/xterm.css", "xterm/LICENSE", "addon-fit/addon-fit.js", "addon-fit/LICENSE"} {
		if !listed[name] {
			t.Errorf("vendor/%s is missing", name)
		}
	}
	script, err := os.ReadFile("../../scripts/xterm.sh")
	if err != nil {
		t.Fatal(err)
	}
	for pkg, pin := range map[string]string{"@xterm/xterm": "XTERM_VERSION", "@xterm/addon-fit": "FIT_VERSION"} {
		m := regexp.MustCompile(`(?m)^` + pin + `=(\S+)`).FindSubmatch(script)
		if m == nil || string(m[1]) != versions[pkg] {
			t.Errorf("%s: SHA256SUMS records %q, scripts/xterm.sh pins %q", pkg, versions[pkg], m)
		}
	}
}

// GET /terminal is the page, its files are under /terminal/, and
// nothing else is.
func TestTerminalPage(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(h.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/terminal?session_id=abc")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
		!strings.Contains(body, `<script src="terminal/vendor/xterm/xterm.js"></script>`) ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src 'self'") ||
		resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("page: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
	want, _ := fs.ReadFile(webFiles, "vendor/xterm/xterm.js")
	for path, ctype := range map[string]string{
		"/terminal/vendor/xterm/xterm.js":         "text/javascript; charset=utf-8",
		"/terminal/vendor/xterm/xterm.css":        "text/css; charset=utf-8",
		"/terminal/vendor/addon-fit/addon-fit.js": "text/javascript; charset=utf-8",
		"/terminal/terminal.js":                   "text/javascript; charset=utf-8",
	} {
		resp, body := get(path)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ctype {
			t.Errorf("%s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if strings.HasSuffix(path, "xterm.js") && body != string(want) {
			t.Errorf("%s is not the embedded file", path)
		}
	}
	for _, path := range []string{"/terminal/", "/terminal/vendor", "/terminal/vendor/", "/terminal/nope.js", "/terminal/xterm.js.map"} {
		if resp, body := get(path); resp.StatusCode != 404 {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
}
