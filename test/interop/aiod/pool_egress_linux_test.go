package aiod

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/internal/nettest"
)

// fetchPy fetches argv[1] from inside a sandbox and prints the body, or
// "unreachable" and why (a dropped packet times out in 2 s).
const fetchPy = `import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())
except Exception as e:
    print("unreachable", type(e).__name__, e)
`

// fetch fetches url from inside the sandbox a serves.
func fetch(t *testing.T, a *aio, url string) string {
	t.Helper()
	return sh(t, a, fmt.Sprintf("python3 -c '%s' %s", fetchPy, url))
}

// TestPoolEgress: the real aiod pool with --egress, against an outside
// host and a DNS server of the test's own: a sandbox of network egress
// reaches the outside through NAT; its allow and deny rules hold by CIDR
// and by name (through its own resolver, named by its resolv.conf); and
// whatever its rules, it reaches neither another sandbox nor the host
// (its loopback, its addresses, the pool's API). Bad input is refused by
// field, and a pool without --egress refuses the network.
func TestPoolEgress(t *testing.T) {
	for _, tool := range []string{"ip", "nft", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("needs %s (Debian iproute2, nftables, util-linux; scripts/test.sh installs them)", tool)
		}
	}
	out := nettest.NewOutside(t)
	dns := nettest.DNS(t, map[string]netip.Addr{"api.allowed.test": out.Addr, "other.test": out.Addr2, "denied.test": out.Addr2})
	p := startPool(t, "pool-egress-token", "--warm", "0", "--egress", "--egress-subnet", "10.242.0.0/24", "--egress-dns", dns.String())
	url, url2 := "http://"+out.Addr.String()+":8080/", "http://"+out.Addr2.String()+":8080/"

	t.Run("open", func(t *testing.T) {
		s := p.create(map[string]any{"network": "egress"})
		if s["network"] != "egress" || fmt.Sprint(s["egress"]) != "map[allow:[] deny:[]]" {
			t.Errorf("object: network %v egress %v", s["network"], s["egress"])
		}
		a := p.sandbox(s)
		// Masqueraded: the outside host sees the host's end of its link.
		if got := fetch(t, a, url); !strings.HasPrefix(got, "outside, from "+out.Host.String()+":") {
			t.Errorf("fetch: %q", got)
		}
		if got := sh(t, a, "cat /etc/resolv.conf; getent ahostsv4 other.test | head -1"); !strings.Contains(got, "nameserver 10.242.0.") ||
			!strings.Contains(got, out.Addr2.String()) {
			t.Errorf("resolv.conf and a lookup: %q", got)
		}
	})

	t.Run("cidr", func(t *testing.T) {
		deny := p.sandbox(p.create(map[string]any{"network": "egress", "egress": map[string]any{"deny": []string{out.Net().String()}}}))
		if got := fetch(t, deny, url); !strings.HasPrefix(got, "unreachable") {
			t.Errorf("denied by CIDR, got %q", got)
		}
		allow := p.sandbox(p.create(map[string]any{"network": "egress", "egress": map[string]any{"allow": []string{out.Addr.String()}}}))
		if got := fetch(t, allow, url); !strings.HasPrefix(got, "outside, from") {
			t.Errorf("allowed address, got %q", got)
		}
		if got := fetch(t, allow, url2); !strings.HasPrefix(got, "unreachable") {
			t.Errorf("an address not allowed, got %q", got)
		}
	})

	t.Run("names", func(t *testing.T) {
		s := p.create(map[string]any{"network": "egress", "egress": map[string]any{"allow": []string{"*.allowed.test"}, "deny": []string{"denied.test"}}})
		if fmt.Sprint(s["egress"]) != "map[allow:[*.allowed.test] deny:[denied.test]]" {
			t.Errorf("egress echoed as %v", s["egress"])
		}
		a := p.sandbox(s)
		if got := fetch(t, a, url); !strings.HasPrefix(got, "unreachable") {
			t.Errorf("an allowed name's address before its lookup, got %q", got)
		}
		if got := fetch(t, a, "http://api.allowed.test:8080/"); !strings.HasPrefix(got, "outside, from") {
			t.Errorf("by allowed name, got %q", got)
		}
		if got := fetch(t, a, "http://other.test:8080/"); !strings.HasPrefix(got, "unreachable") {
			t.Errorf("a name no rule allows, got %q", got)
		}
		if got := sh(t, a, "getent ahostsv4 denied.test || echo none"); strings.TrimSpace(got) != "none" {
			t.Errorf("a denied name resolved: %q", got)
		}
	})

	t.Run("walls", func(t *testing.T) {
		wide := map[string]any{"network": "egress", "egress": map[string]any{"allow": []string{"0.0.0.0/0"}}}
		a, b := p.sandbox(p.create(wide)), p.sandbox(p.create(wide))
		bAddr := strings.TrimSpace(sh(t, b, "ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1"))
		gw := strings.TrimSpace(sh(t, a, "ip route show default | awk '{print $3}'"))
		if _, err := netip.ParseAddr(bAddr); err != nil {
			t.Fatalf("b's address %q", bAddr)
		}
		sh(t, b, "nohup python3 -m http.server 9000 --bind 0.0.0.0 >/dev/null 2>&1 & sleep 0.1")
		if got := fetch(t, b, "http://"+bAddr+":9000/"); !strings.Contains(got, "Directory listing") {
			t.Fatalf("b does not serve itself: %q", got)
		}
		if got := fetch(t, a, "http://"+bAddr+":9000/"); !strings.HasPrefix(got, "unreachable") {
			t.Errorf("a sandbox reached another: %q", got)
		}
		// A server of the host's on every address, and the pool's API.
		hl, err := net.Listen("tcp", "0.0.0.0:0")
		nettest.Must(t, err)
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("host")) })}
		go func() { _ = hs.Serve(hl) }()
		defer hs.Close()
		port := hl.Addr().(*net.TCPAddr).Port
		_, poolPort, _ := net.SplitHostPort(strings.TrimPrefix(p.URL, "http://"))
		for _, u := range []string{
			fmt.Sprintf("http://%s:%d/", gw, port), fmt.Sprintf("http://%s:%d/", out.Host, port),
			fmt.Sprintf("http://127.0.0.1:%d/", port), "http://" + gw + ":" + poolPort + "/v2/sandboxes",
			"http://127.0.0.1:" + poolPort + "/v2/sandboxes",
		} {
			if got := fetch(t, a, u); !strings.HasPrefix(got, "unreachable") {
				t.Errorf("a sandbox allowed 0.0.0.0/0 reached the host at %s: %q", u, got)
			}
		}
		if got := fetch(t, a, url); !strings.HasPrefix(got, "outside, from") {
			t.Errorf("the wide sandbox does not reach the outside: %q", got)
		}
	})

	t.Run("input", func(t *testing.T) {
		for _, c := range []struct {
			body any
			want string
		}{
			{map[string]any{"network": "egress", "egress": map[string]any{"allow": []string{"10.0.0.0/33"}}},
				`{"error":{"code":400,"message":"egress.allow: \"10.0.0.0/33\" is not an IPv4 address or CIDR, a host name, or *. and a host name"}}`},
			{map[string]any{"network": "egress", "egress": map[string]any{"deny": []string{"::1"}}},
				`{"error":{"code":400,"message":"egress.deny: \"::1\": only IPv4 (IPv6 is not routed)"}}`},
			{map[string]any{"egress": map[string]any{"allow": []string{"example.com"}}},
				`{"error":{"code":400,"message":"egress: applies to network \"egress\" only"}}`},
			{map[string]any{"network": "egress", "egress": map[string]any{"allow": "example.com"}},
				`{"error":{"code":400,"message":"egress.allow: must be an array, not string"}}`},
			{map[string]any{"network": "wifi"},
				`{"error":{"code":400,"message":"network: must be none, host or egress, not \"wifi\""}}`},
		} {
			resp, body := p.client().raw("POST", "/v2/sandboxes", c.body)
			if resp.StatusCode != 400 || strings.TrimSpace(string(body)) != c.want {
				t.Errorf("%v: %d %s\nwant %s", c.body, resp.StatusCode, body, c.want)
			}
		}
		plain := startPool(t, "pool-plain-token", "--warm", "0")
		resp, body := plain.client().raw("POST", "/v2/sandboxes", map[string]any{"network": "egress"})
		if want := `{"error":{"code":400,"message":"network: egress is offered only where the pool was started with --egress"}}`; resp.StatusCode != 400 || strings.TrimSpace(string(body)) != want {
			t.Errorf("without --egress: %d %s", resp.StatusCode, body)
		}
	})
}
