package aiod

import (
	"crypto/sha256"
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

// sum is the SHA-256 of a host file.
func sum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// TestPoolMachine: the real aiod pool with --machine: a sandbox is root
// inside a user namespace of its own, installs a Debian package (built by
// the test, no network) with dpkg and apt-get, writes /usr and /etc; the
// host's files and package database are byte for byte unchanged, another
// sandbox sees none of it, and what other host accounts cannot read
// (/etc/shadow) is not there.
func TestPoolMachine(t *testing.T) {
	for _, tool := range []string{"nsenter", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("needs %s", tool)
		}
	}
	status, hosts := sum(t, "/var/lib/dpkg/status"), sum(t, "/etc/hosts")
	p := startPool(t, "pool-machine-token", "--warm", "1", "--machine")
	resp, out := p.client().raw("POST", "/v2/sandboxes", map[string]any{"machine": true, "network": "host"})
	if resp.StatusCode != 400 || !strings.Contains(string(out), "a whole machine has a network of its own") {
		t.Errorf("a machine with the host's network: %d %s", resp.StatusCode, out)
	}
	s := p.create(map[string]any{"machine": true})
	if s["machine"] != true {
		t.Errorf("machine: %v", s["machine"])
	}
	a := p.sandbox(s)
	ws := filepath.Join(p.root, "layers", s["id"].(string), "workspace") // in its upper layer

	// A package of the test's own, in the workspace.
	pkg := filepath.Join(t.TempDir(), "a2c-hello")
	for _, d := range []string{"DEBIAN", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(pkg, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pkg, "DEBIAN/control"), []byte("Package: a2c-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.com>\nDescription: test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "usr/bin/a2c-hello"), []byte("#!/bin/sh\necho hello from a package\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", pkg, "/tmp/a2c-hello-test.deb").CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v %s", err, out)
	}
	defer os.Remove("/tmp/a2c-hello-test.deb")
	data, _ := os.ReadFile("/tmp/a2c-hello-test.deb")
	if err := os.WriteFile(filepath.Join(ws, "a2c-hello.deb"), data, 0o644); err != nil {
		t.Fatal(err)
	}

	// The exec API's output drops the last newline.
	for _, c := range []struct{ name, script, want string }{
		{"root", "id -u; whoami", "0\nroot"},
		{"apt-get", "cd " + ws + " && apt-get install -y ./a2c-hello.deb >/dev/null 2>&1; a2c-hello; dpkg-query -W -f '${Status}' a2c-hello", "hello from a package\ninstall ok installed"},
		{"etc", "echo '10.9.9.9 machine.test' >> /etc/hosts; getent hosts machine.test", "10.9.9.9        machine.test"},
		{"chown", "touch /opt/x && chown 1000:1000 /opt/x && stat -c %u /opt/x", "1000"},
		{"shadow", "test -e /etc/shadow && echo there || echo absent", "absent"},
	} {
		if got := sh(t, a, c.script); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	// The file plane writes as root inside, into the workspace in the
	// upper layer, stored with the ids it has inside shifted by
	// sandbox.LayerIDs (3000000000: root's file is never the host
	// root's).
	code, e := a.call("POST", "/v1/file/write", "/v1/file/write", map[string]any{"file": ws + "/from-api.txt", "content": "api\n"})
	if code != 200 || !e.Success {
		t.Errorf("file write: %d %s", code, e.raw)
	}
	if got := sh(t, a, "stat -c '%U %s' "+ws+"/from-api.txt"); got != "root 4" {
		t.Errorf("the API's file inside: %q", got)
	}
	if fi, err := os.Stat(filepath.Join(ws, "from-api.txt")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 3_000_000_000 {
		t.Errorf("the API's file on the host: %v %v, want uid 3000000000", fi, err)
	}
	if _, err := os.Stat("/usr/bin/a2c-hello"); err == nil {
		t.Error("the package landed on the host")
	}
	if sum(t, "/var/lib/dpkg/status") != status || sum(t, "/etc/hosts") != hosts {
		t.Error("the host's dpkg status or /etc/hosts changed")
	}
	other := p.sandbox(p.create(map[string]any{"machine": true}))
	if got := sh(t, p.sandbox(p.create(nil)), "id -u"); got == "0" {
		t.Error("a sandbox created without machine is root")
	}
	if got := sh(t, other, "command -v a2c-hello || echo none; grep -c machine.test /etc/hosts"); got != "none\n0" {
		t.Errorf("another sandbox sees the first's writes: %q", got)
	}
	if !strings.Contains(sh(t, other, "cat /proc/self/uid_map"), "65536") {
		t.Error("no user namespace of its own")
	}
}

// TestPoolMachineDisk: with --disk, a whole machine's own writes (its
// system and workspace, not what it shares with its template) are
// bounded by its layer's quota: past it a write fails inside, another
// machine still writes, and the host's filesystem is not touched.
func TestPoolMachineDisk(t *testing.T) {
	p := startPool(t, "pool-machine-disk-token", "--warm", "0", "--machine", "--disk", "64MiB")
	a := p.sandbox(p.create(map[string]any{"machine": true}))
	b := p.sandbox(p.create(map[string]any{"machine": true}))
	got := sh(t, a, "dd if=/dev/zero of=/opt/big bs=1M count=128 2>&1 | grep -o 'Disk quota exceeded' | head -1; sync; echo ws > ./small.txt 2>&1 || echo refused")
	if !strings.Contains(got, "Disk quota exceeded") {
		t.Errorf("a write past the quota: %q", got)
	}
	if got := sh(t, b, "dd if=/dev/zero of=/opt/fine bs=1M count=16 2>&1 >/dev/null | tail -1; echo rc=$?"); !strings.HasSuffix(got, "rc=0") {
		t.Errorf("another machine: %q", got)
	}
	// After the big file is gone, the machine writes again.
	if got := sh(t, a, "rm /opt/big; sync; sleep 1; dd if=/dev/zero of=/opt/again bs=1M count=8 2>/dev/null; echo rc=$?"); got != "rc=0" {
		t.Errorf("after freeing: %q", got)
	}
}

// TestPoolMachineAll: with --machine=all, a create that does not say is
// a whole machine (and a warm one: --warm keeps machines), "machine":
// false or network host is a plain sandbox, and a machine is refused the
// host's network or a plain fork.
func TestPoolMachineAll(t *testing.T) {
	p := startPool(t, "pool-machine-all-token", "--warm", "1", "--machine=all", "--allow-host-network", "--max", "8")
	warmRE := regexp.MustCompile(`aiod_pool_sandboxes\{state="warm"\} 1\b`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, m := p.client().raw("GET", "/metrics", nil); warmRE.Match(m) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the warm machine did not fill:\n%s", m)
		}
	}
	s := p.create(map[string]any{})
	if s["machine"] != true {
		t.Fatalf("a create that does not say: machine %v, want true", s["machine"])
	}
	if got := sh(t, p.sandbox(s), "id -u; cat /proc/self/uid_map | tr -s ' '"); !strings.HasPrefix(got, "0\n 0 ") {
		t.Errorf("root inside: %q", got)
	}
	if _, m := p.client().raw("GET", "/metrics", nil); !regexp.MustCompile(`aiod_pool_creates_total\{source="warm"\} 1\b`).Match(m) {
		t.Errorf("the create was not served by the warm machine:\n%s", m)
	}
	for _, body := range []map[string]any{{"machine": false}, {"network": "host"}} {
		plain := p.create(body)
		if _, ok := plain["machine"]; ok {
			t.Errorf("%v: machine %v, want none (a plain sandbox)", body, plain["machine"])
		}
		if got := sh(t, p.sandbox(plain), "id -u"); got == "0" {
			t.Errorf("%v: root", body)
		}
	}
	for _, c := range []struct {
		path string
		body map[string]any
		want string
	}{
		{"/v2/sandboxes", map[string]any{"machine": true, "network": "host"}, `{"error":{"code":400,"message":"network: a whole machine has a network of its own: none or egress"}}`},
		{"/v2/sandboxes/" + s["id"].(string) + "/fork", map[string]any{"machine": false}, `{"error":{"code":400,"message":"machine: a sandbox from a snapshot, or from a template made of one, is a whole machine"}}`},
	} {
		resp, out := p.client().raw("POST", c.path, c.body)
		if resp.StatusCode != 400 || strings.TrimSpace(string(out)) != c.want {
			t.Errorf("%s %v: %d %s, want 400 %s", c.path, c.body, resp.StatusCode, out, c.want)
		}
	}
	// The refused fork took no snapshot.
	if _, out := p.client().raw("GET", "/v2/snapshots", nil); strings.Contains(string(out), s["id"].(string)) {
		t.Errorf("a refused fork left a snapshot: %s", out)
	}
}
