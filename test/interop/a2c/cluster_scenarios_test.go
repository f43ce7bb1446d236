package a2c

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// The scenario scripts against a cluster: each of the three servers the
// scripts expect (plain, --token, --relay-timeout 1s; see servers) is a hub
// of three `a2c server --redis` nodes on its own Redis (a hub's node ids
// and channels are its own: two hubs on one Redis, even on two databases,
// would share the publish/subscribe namespace). The scripts' A2C_PLACEMENT
// puts every Agent on one node and every Computer on one of the two
// others, in turn, so that every request, answer, notification and
// list_room between an Agent and a Computer crosses nodes. The real
// a2c Computers of the put_blob, skills and tags scenarios run on a
// Computer node too.
//
// Two ways in: directly (each peer dials its node's URL) and through nginx
// (harness.Nginx: hash $remote_addr consistent), where a peer reaches its
// node only by the loopback source address its connections come from.

// clSlot is one place a script's peer may connect: a URL, and the local
// address its connections come from (through nginx).
type clSlot struct {
	URL    string `json:"url"`
	Source string `json:"source,omitempty"`
}

// clHub is one server of the scripts, served by a cluster.
type clHub struct {
	url       string   // what the script is given (A2C_URL, ...)
	agents    clSlot   // where the Agents connect
	computers []clSlot // where the Computers connect, in turn
	// computerURL is where the real a2c Computers connect (they cannot
	// choose a source address: through nginx they come from 127.0.0.1).
	computerURL string
	agentNode   *harness.Proc
	otherNodes  []*harness.Proc
}

// clStartHub starts a Redis and three nodes with flags, and nginx in front
// of them when viaNginx, and decides the placement: the Agents on one node,
// the Computers on the two others.
func clStartHub(t *testing.T, viaNginx bool, flags ...string) clHub {
	t.Helper()
	r := harness.Redis(t)
	nodes := harness.Hub(t, 3, r.URL(), flags...)
	if !viaNginx {
		return clHub{
			url:         nodes[0].URL,
			agents:      clSlot{URL: nodes[0].URL},
			computers:   []clSlot{{URL: nodes[1].URL}, {URL: nodes[2].URL}},
			computerURL: nodes[2].URL,
			agentNode:   nodes[0],
			otherNodes:  nodes[1:],
		}
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	ng := harness.Nginx(t, addrs)
	// 127.0.0.1 (raw HTTP checks, the real Computers) lands on a Computer
	// node: the Agents take the first node it does not reach.
	home := ng.Route(t, "127.0.0.1")
	h := clHub{url: ng.URL(), computerURL: ng.URL()}
	var taken []string
	for _, n := range nodes {
		if h.agentNode == nil && n.Addr != home {
			h.agentNode = n
			src := ng.SourceFor(t, n.Addr)
			taken = append(taken, src)
			h.agents = clSlot{URL: ng.URL(), Source: src}
		}
	}
	for _, n := range nodes {
		if n == h.agentNode {
			continue
		}
		src := ng.SourceFor(t, n.Addr, taken...)
		taken = append(taken, src)
		h.computers = append(h.computers, clSlot{URL: ng.URL(), Source: src})
		h.otherNodes = append(h.otherNodes, n)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nginx in front of %v:\n%s", addrs, clTail(ng.Logs(), 60))
		}
	})
	return h
}

// clTail is the last n lines of s.
func clTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// clEntries are the cluster runs of each script: the default protocol
// version and WebSocket mode, each transport choice once, directly and
// through nginx. The upgrade and polling entries also get the real a2c
// Computers.
var clEntries = func() []struct {
	name, transports string
	viaNginx         bool
	computers        bool
} {
	type entry = struct {
		name, transports string
		viaNginx         bool
		computers        bool
	}
	var m []entry
	for _, via := range []string{"direct", "nginx"} {
		m = append(m,
			entry{via + "/upgrade", "polling,websocket", via == "nginx", true},
			entry{via + "/websocket", "websocket", via == "nginx", false},
			entry{via + "/polling", "polling", via == "nginx", true})
	}
	return m
}()

// runClusterScripts runs a scenario script once per entry of clEntries,
// the entries as parallel subtests, then checks from the nodes' metrics
// that the Agents and Computers really were on different nodes.
func runClusterScripts(t *testing.T, name string, args ...string) {
	harness.Bin(t, "a2c")
	harness.BinPkg(t, "./test/interop/a2c/testdata/toolsrv")
	for _, e := range clEntries {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			plain := clStartHub(t, e.viaNginx)
			auth := clStartHub(t, e.viaNginx, "--token", "s3cret")
			relay := clStartHub(t, e.viaNginx, "--relay-timeout", "1s")
			placement := map[string]map[string][]clSlot{}
			for _, h := range []clHub{plain, auth, relay} {
				placement[h.url] = map[string][]clSlot{"agent": {h.agents}, "computer": h.computers}
			}
			pj, err := json.Marshal(placement)
			if err != nil {
				t.Fatal(err)
			}
			env := []string{
				"A2C_URL=" + plain.url,
				"A2C_AUTH_URL=" + auth.url,
				"A2C_TOKEN_VALUE=s3cret",
				"A2C_RELAY_TIMEOUT_URL=" + relay.url,
				"A2C_TRANSPORTS=" + e.transports,
				"A2C_VERSION=" + smcp.ProtocolVersion,
				"A2C_PLACEMENT=" + string(pj),
			}
			if e.computers {
				env = append(env, computerEnv(t, plain.computerURL, nil)...)
			}
			t.Logf("placement %s (cluster up in %s)", pj, time.Since(start).Round(time.Millisecond))
			// Checked even when a scenario failed (RunScenarios ends the
			// test): a peer on the wrong node explains many failures.
			defer func() {
				for _, h := range []clHub{plain, relay} {
					clCheckCrossNode(t, h)
				}
				t.Logf("%s took %s", e.name, time.Since(start).Round(time.Second))
			}()
			harness.RunScenarios(t, env, name, args...)
		})
	}
}

// clCheckCrossNode fails the test unless every request between an Agent
// and a Computer crossed nodes. Requests are counted where the Agent is
// (a2c_relayed_calls_total); those the server forwarded to a Computer
// (every outcome but "refused", which the server answers itself) must all
// have left the Agents' node as request frames, so that none went to a
// Computer beside its Agent. No request may be counted on the other nodes
// (no Agent was there) nor reach the Agents' node (no Computer was there).
func clCheckCrossNode(t *testing.T, h clHub) {
	t.Helper()
	a := clMetrics(t, h.agentNode)
	forwarded := a.sum("a2c_relayed_calls_total", func(l map[string]string) bool { return l["outcome"] != "refused" })
	out := a.sum("a2c_cluster_frames_total", clLabels("direction", "out", "kind", "request"))
	in := a.sum("a2c_cluster_frames_total", clLabels("direction", "in", "kind", "request"))
	t.Logf("agents' node %s: %v calls forwarded, %v request frames out, %v in", h.agentNode.Addr, forwarded, out, in)
	if forwarded == 0 || out != forwarded || in != 0 {
		t.Errorf("agents' node %s: %v calls forwarded to Computers, %v request frames out, %v in; want as many out as forwarded (> 0), none in",
			h.agentNode.Addr, forwarded, out, in)
	}
	var received float64
	for _, n := range h.otherNodes {
		m := clMetrics(t, n)
		received += m.sum("a2c_cluster_frames_total", clLabels("direction", "in", "kind", "request"))
		if calls := m.sum("a2c_relayed_calls_total", nil); calls != 0 {
			t.Errorf("computers' node %s handled %v requests of an Agent (an Agent was there)", n.Addr, calls)
		}
	}
	if received != out {
		t.Errorf("the computers' nodes received %v request frames, the Agents' node sent %v", received, out)
	}
}

// clSamples are the samples of a node's /metrics: name, labels, value.
type clSamples []struct {
	name   string
	labels map[string]string
	value  float64
}

// sum adds the values of the samples called name whose labels match (all
// when match is nil).
func (s clSamples) sum(name string, match func(map[string]string) bool) float64 {
	var v float64
	for _, x := range s {
		if x.name == name && (match == nil || match(x.labels)) {
			v += x.value
		}
	}
	return v
}

// clLabels matches labels holding the given name, value pairs.
func clLabels(kv ...string) func(map[string]string) bool {
	return func(l map[string]string) bool {
		for i := 0; i+1 < len(kv); i += 2 {
			if l[kv[i]] != kv[i+1] {
				return false
			}
		}
		return true
	}
}

// clMetrics reads a node's /metrics (Prometheus text format; label values
// here hold no commas, quotes or braces). A failure is reported with
// t.Errorf (it runs in a deferred check) and reads as no samples.
func clMetrics(t *testing.T, node *harness.Proc) clSamples {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(node.URL + "/metrics")
	if err != nil {
		t.Errorf("metrics of %s: %v", node.Addr, err)
		return nil
	}
	defer resp.Body.Close()
	var out clSamples
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		val, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Errorf("metrics of %s: %q: %v", node.Addr, line, err)
			return nil
		}
		name, labels := line[:sp], map[string]string{}
		if i := strings.IndexByte(name, '{'); i >= 0 {
			for _, l := range strings.Split(strings.TrimSuffix(name[i+1:], "}"), ",") {
				if k, v, ok := strings.Cut(l, "="); ok {
					labels[k] = strings.Trim(v, `"`)
				}
			}
			name = name[:i]
		}
		out = append(out, struct {
			name   string
			labels map[string]string
			value  float64
		}{name, labels, val})
	}
	if err := sc.Err(); err != nil {
		t.Errorf("metrics of %s: %v", node.Addr, err)
		return nil
	}
	return out
}

func TestClusterPythonClients(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import socketio, requests, websocket").Run(); err != nil {
		harness.MissingPeer(t, "Debian python3-socketio, python3-requests, python3-websocket")
	}
	runClusterScripts(t, "/usr/bin/python3", "test/interop/a2c/python/scenarios.py")
}

func TestClusterNodeClients(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		harness.MissingPeer(t, "node")
	}
	if _, err := os.Stat(filepath.Join(harness.Root(), "test/interop/a2c/node/node_modules/socket.io-client")); err != nil {
		harness.MissingPeer(t, "npm socket.io-client (npm ci in test/interop/a2c/node)")
	}
	runClusterScripts(t, "node", "test/interop/a2c/node/scenarios.js")
}
