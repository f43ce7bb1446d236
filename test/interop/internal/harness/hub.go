package harness

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Hub starts n `a2c server` processes that form one cluster through the
// Redis at redisURL (a redis:// URL, or comma-separated addresses of a
// Redis Cluster), each on its own random 127.0.0.1 port with node id
// "node1" … "nodeN", and the extra flags. Each is stopped with SIGTERM at
// cleanup and must exit cleanly; kill one with Proc.Cmd().Process.Kill.
func Hub(t testing.TB, n int, redisURL string, flags ...string) []*Proc {
	t.Helper()
	nodes := make([]*Proc, n)
	for i := range nodes {
		args := append([]string{"server", "--listen", "127.0.0.1:0", "--redis", redisURL, "--node-id", fmt.Sprintf("node%d", i+1)}, flags...)
		nodes[i] = Run(t, Keyed(exec.Command(Bin(t, "a2c"), args...)), true)
	}
	return nodes
}

// ClusterKey is the cluster key of the nodes the tests start: every node
// of one test's cluster must share it, as in production, so the frames
// between them are sealed and checked.
const ClusterKey = "interop-cluster-key-of-the-tests"

// Keyed gives cmd, an `a2c server --redis ...`, the tests' cluster key
// through the environment (never on the command line, as a user would).
func Keyed(cmd *exec.Cmd) *exec.Cmd {
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "A2C_CLUSTER_KEY="+ClusterKey)
	return cmd
}
