package sandbox

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBindResolvLinks: a host resolv.conf that is a link (systemd-resolved)
// is followed within the view: a target in no bound directory is created
// in the view's root; one in a system directory that is not there, a
// loop, or an unusable nameserver is refused. (The regular-file case
// binds, and is run by TestNetworkEgress inside a real view.)
func TestBindResolvLinks(t *testing.T) {
	for _, c := range []struct {
		name, link, ns, want, err string
	}{
		{"systemd", "../run/systemd/resolve/stub-resolv.conf", "10.1.2.1", "/run/systemd/resolve/stub-resolv.conf", ""},
		{"absolute", "/run/resolvconf/resolv.conf", "10.1.2.1", "/run/resolvconf/resolv.conf", ""},
		{"into usr", "/usr/share/missing/resolv.conf", "10.1.2.1", "", "which the view cannot hold"},
		{"into proc", "/proc/self/net/resolv", "10.1.2.1", "", "which the view cannot hold"},
		{"loop", "resolv.conf", "10.1.2.1", "", "too many links"},
		{"bad nameserver", "../run/x", "example.com", "", "nameserver"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := t.TempDir()
			if err := os.MkdirAll(r+"/etc", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(c.link, r+"/etc/resolv.conf"); err != nil {
				t.Fatal(err)
			}
			err := bindResolv(r, c.ns)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(r, c.want))
			if err != nil || string(b) != string(resolvConf(netip.MustParseAddr(c.ns))) {
				t.Fatalf("%s: %q %v", c.want, b, err)
			}
		})
	}
}
