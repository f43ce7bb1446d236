package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUpBadCommandLines(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"up", "--bogus"}, 2, "a2c up: flag provided but not defined: -bogus"},
		{[]string{"up", "extra"}, 2, "a2c up: unexpected argument extra"},
		{[]string{"up", "--log-level", "loud"}, 2, "a2c up: bad --log-level loud"},
		{[]string{"up", "--workspace", ws, "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--config", filepath.Join(ws, "none.json")},
			1, "a2c up: open " + filepath.Join(ws, "none.json") + ": no such file or directory"},
	} {
		code, stdout, stderr := run(tc.args...)
		if code != tc.code || stderr != tc.want+"\n" || stdout != "" {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Errorf("a refused a2c up created its workspace (%v)", err)
	}
}

func TestLocalURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8000": "127.0.0.1:8000", "0.0.0.0:8000": "127.0.0.1:8000", "[::]:8000": "127.0.0.1:8000",
		"[::1]:8000": "[::1]:8000", "10.1.2.3:80": "10.1.2.3:80", "garbage": "garbage",
	} {
		if got := localURL(in); got != want {
			t.Errorf("localURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUpBanner(t *testing.T) {
	const try = `a2c up: try: a2c call sandbox__sandbox_execute_bash --args '{"cmd":"echo hi"}'`
	for _, tc := range []struct {
		name string
		b    upBanner
		want string // the try line
	}{
		{"defaults", upBanner{hubAddr: "127.0.0.1:8000", server: "http://127.0.0.1:8000", office: "default"}, try},
		{"port", upBanner{hubAddr: "127.0.0.1:9000", server: "http://127.0.0.1:9000", office: "default"}, try + " --server http://127.0.0.1:9000"},
		{"any-address", upBanner{hubAddr: "[::]:8000", server: "http://127.0.0.1:8000", office: "default"}, try},
		{"token-flag", upBanner{hubAddr: "127.0.0.1:8000", server: "http://127.0.0.1:8000", office: "default", auth: true, token: "s3cret"}, try + " --token s3cret"},
		{"token-env", upBanner{hubAddr: "127.0.0.1:8000", server: "http://127.0.0.1:8000", office: "default", auth: true, token: "s3cret", tokenFromEnv: true}, try},
		{"quoted", upBanner{hubAddr: "127.0.0.1:8000", server: "http://127.0.0.1:8000", office: "my office", auth: true, token: "it's"}, try + ` --office 'my office' --token 'it'\''s'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			printUpBanner(&env{stderr: &out}, tc.b)
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != 4 || lines[3] != tc.want {
				t.Fatalf("banner:\n%s\nwant last line %s", out.String(), tc.want)
			}
			if !strings.HasPrefix(lines[0], "a2c up: hub listening addr="+tc.b.hubAddr+" url="+tc.b.server+" ") {
				t.Errorf("first line %q does not start with the hub's addr= and the URL a local client uses", lines[0])
			}
		})
	}
}

func TestUpBannerBrowser(t *testing.T) {
	const path = "/devtools/browser/0b5c9f6e-1d2a-4c3b-9e8f-7a6b5c4d3e2f"
	for _, tc := range []struct {
		name string
		b    upBanner
		want string
	}{
		{"open", upBanner{boxAddr: "127.0.0.1:18091", cdpPath: path},
			"a2c up: browser cdp_url=ws://127.0.0.1:18091/cdp" + path + " auth=false"},
		{"any-address", upBanner{boxAddr: "0.0.0.0:18091", cdpPath: path},
			"a2c up: browser cdp_url=ws://127.0.0.1:18091/cdp" + path + " auth=false"},
		{"token-flag", upBanner{boxAddr: "127.0.0.1:18091", cdpPath: path, auth: true, token: "a b&c"},
			"a2c up: browser cdp_url=ws://127.0.0.1:18091/cdp" + path + "?api_key=a+b%26c auth=true"},
		{"token-env", upBanner{boxAddr: "127.0.0.1:18091", cdpPath: path, auth: true, token: "s3cret", tokenFromEnv: true},
			"a2c up: browser cdp_url=ws://127.0.0.1:18091/cdp" + path + " auth=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.b.hubAddr, tc.b.server, tc.b.office = "127.0.0.1:8000", "http://127.0.0.1:8000", "default"
			var out bytes.Buffer
			printUpBanner(&env{stderr: &out}, tc.b)
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != 5 || lines[3] != tc.want || !strings.HasPrefix(lines[4], "a2c up: try: ") {
				t.Fatalf("banner:\n%s\nwant line 4 %s, then the try line", out.String(), tc.want)
			}
			if tc.b.tokenFromEnv && strings.Contains(out.String(), tc.b.token) {
				t.Errorf("the banner shows a token taken from the environment:\n%s", out.String())
			}
		})
	}
	var out bytes.Buffer
	printUpBanner(&env{stderr: &out}, upBanner{hubAddr: "127.0.0.1:8000", server: "http://127.0.0.1:8000", office: "default", display: ":99"})
	if !strings.Contains(out.String(), "\na2c up: desktop display=:99\n") {
		t.Errorf("no desktop line in:\n%s", out.String())
	}
}
