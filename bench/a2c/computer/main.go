// Command computer measures what the Computer adds to a tool call:
//
//	go run ./bench/a2c/computer [-calls 2000] [-sleep 50ms]
//
// It serves one MCP server (the official Go SDK, streamable HTTP, on
// 127.0.0.1) and calls its "echo" tool two ways in the same run: directly
// with the Go MCP client, and as an Agent through `a2c server` and
// `a2c computer` (real binaries, separate processes). It prints p50/p99 of
// both and their difference, then runs a tool that sleeps with 1, 10 and
// 100 concurrent calls through the Computer to show that calls do not
// serialise.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
	"github.com/a2c-smcp/a2c-go/bench/internal/procs"
)

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "computer bench:", err)
		os.Exit(1)
	}
}

func main() {
	calls := flag.Int("calls", 2000, "sequential calls per path")
	sleep := flag.Duration("sleep", 50*time.Millisecond, "duration of the sleeping tool for the concurrency test")
	flag.Parse()

	upURL := serveUpstream(*sleep)
	root, err := procs.ModuleRoot()
	check(err)
	tmp, err := os.MkdirTemp("", "a2c-bench-computer-")
	check(err)
	defer os.RemoveAll(tmp)
	bin, err := procs.BuildA2C(root, tmp)
	check(err)

	srvCmd := exec.Command(bin, "server", "--listen", "127.0.0.1:0", "--log-level", "warn")
	srvURL, err := procs.Start(srvCmd)
	check(err)
	defer procs.Stop(srvCmd)
	cfg := filepath.Join(tmp, "servers.json")
	check(os.WriteFile(cfg, []byte(fmt.Sprintf(`{"name":"up","type":"streamable","server_parameters":{"url":%q}}`, upURL)), 0o600))
	comp := exec.Command(bin, "computer", "--server", srvURL, "--office", "bench", "--name", "pc", "--config", cfg, "--log-level", "warn")
	check(comp.Start())
	defer procs.Stop(comp)

	ctx := context.Background()
	a, err := agent.Dial(ctx, srvURL, agent.Options{Name: "agent"})
	check(err)
	defer a.Close()
	check(a.Join(ctx, "bench"))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		tools, _ := a.Tools(ctx, "pc")
		if len(tools) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("the Computer never listed its tools"))
		}
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: upURL}, nil)
	check(err)
	defer cs.Close()

	args := map[string]any{"message": "hello"}
	direct := measure(*calls, func() error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
		return err
	})
	via := measure(*calls, func() error {
		r, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "up__echo", Params: args, Timeout: 30 * time.Second})
		if err == nil && r.IsError {
			err = fmt.Errorf("tool error: %s", r.Text())
		}
		return err
	})
	fmt.Printf("### Computer overhead (%d sequential echo calls per path)\n\n", *calls)
	fmt.Println("| path | p50 | p99 |")
	fmt.Println("|---|---:|---:|")
	fmt.Printf("| Go MCP client -> MCP server | %s | %s |\n", lat.US(direct[0]), lat.US(direct[1]))
	fmt.Printf("| Agent -> a2c server -> a2c computer -> MCP server | %s | %s |\n", lat.US(via[0]), lat.US(via[1]))
	fmt.Printf("\n- added at p50: %s (target <= 1 ms); p50 ratio %.2fx; added at p99: %s\n\n",
		lat.US(via[0]-direct[0]), float64(via[0])/float64(direct[0]), lat.US(via[1]-direct[1]))

	fmt.Printf("### Concurrent calls of a tool that sleeps %s, through the Computer\n\n", *sleep)
	fmt.Println("| concurrent calls | wall time | calls/s |")
	fmt.Println("|---:|---:|---:|")
	for _, n := range []int{1, 10, 100} {
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := a.CallTool(ctx, agent.Call{Computer: "pc", Tool: "up__sleep", Timeout: 60 * time.Second})
				if err == nil && r.IsError {
					err = fmt.Errorf("tool error: %s", r.Text())
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		check(firstErr)
		d := time.Since(start)
		fmt.Printf("| %d | %s | %.0f |\n", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
	}
}

// measure is lat.Measure that ends the benchmark on an error.
func measure(n int, f func() error) [2]time.Duration {
	p50, p99, err := lat.Measure(n, f)
	check(err)
	return [2]time.Duration{p50, p99}
}
func serveUpstream(sleep time.Duration) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	type msg struct {
		Message string `json:"message"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in msg) (*mcp.CallToolResult, msg, error) {
		return nil, in, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		select {
		case <-time.After(sleep):
		case <-ctx.Done():
		}
		return nil, struct{}{}, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go func() {
		_ = http.Serve(ln, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	}()
	return "http://" + ln.Addr().String() + "/"
}
