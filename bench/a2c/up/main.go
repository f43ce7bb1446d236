// Command up measures `a2c up`, the one-command setup (hub, in-process
// aiod and the sandbox Computer in office "default"):
//
//	go run ./bench/a2c/up [-calls 1000] [-starts 10] [-block 50] [-cpu-profile FILE]
//
// It measures, in one run:
//
//   - start to ready over -starts runs: from starting the a2c up process
//     to the first answer of an Agent's tools list that holds the
//     sandbox's tools (process start, hub, aiod, Computer join, Agent
//     connect, join and list all included);
//   - idle RSS of the a2c up process (VmRSS, and with its child
//     processes) after ready and a few calls;
//   - `echo hi` six ways into the same a2c up process, interleaved in
//     blocks so every path sees the same machine: POST /v2/commands (sync)
//     and POST /mcp (sandbox_execute_bash, plain JSON-RPC) on its sandbox
//     API (--sandbox-listen), the whole A2C path (Agent SDK -> a2c
//     server -> Computer -> in-process sandbox) through its hub, and the
//     hub's MCP gateway (the Go MCP SDK's client -> /mcp on the hub ->
//     Computer -> sandbox) in a 2025-11-25 session and at 2026-07-28,
//     and as a plain HTTP client at 2026-07-28, with p50/p99 and the
//     differences.
//
// a2c is built from this module and runs as a separate process on
// 127.0.0.1. It prints markdown for bench/RESULTS.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/internal/proctree"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
	"github.com/a2c-smcp/a2c-go/bench/internal/procs"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// bashTool is the sandbox's command tool as a2c up exposes it.
const bashTool = "sandbox__sandbox_execute_bash"

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "up bench:", err)
		os.Exit(1)
	}
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true}, Timeout: time.Minute}

func main() {
	calls := flag.Int("calls", 1000, "sequential echo calls per path")
	starts := flag.Int("starts", 10, "a2c up starts timed to ready")
	block := flag.Int("block", 50, "calls per path per turn of the interleaving")
	profile := flag.String("cpu-profile", "", "write the measured a2c up's Go CPU profile to this file (go tool pprof)")
	flag.Parse()

	root, err := procs.ModuleRoot()
	check(err)
	tmp, err := os.MkdirTemp("", "a2c-bench-up-")
	check(err)
	defer os.RemoveAll(tmp)
	a2c, err := procs.BuildA2C(root, tmp)
	check(err)
	ctx := context.Background()

	fmt.Printf("## a2c up (`go run ./bench/a2c/up -calls %d -starts %d -block %d`)\n\n", *calls, *starts, *block)

	// Start -> ready, each run on a fresh workspace.
	var phases [3][]time.Duration // addresses printed, Agent joined, ready
	for i := range *starts {
		u, ph := startUp(ctx, a2c, filepath.Join(tmp, fmt.Sprintf("ws-start-%d", i)), "")
		for j := range phases {
			phases[j] = append(phases[j], ph[j])
		}
		u.stop()
	}
	fmt.Printf("### Start to ready (%d runs: from starting the process to the first tools answer holding %s)\n\n", *starts, bashTool)
	fmt.Println("| from process start to | min | p50 | max |")
	fmt.Println("|---|---:|---:|---:|")
	for j, what := range []string{"both addresses printed", "the Agent connected and joined", "**ready: the tools answer**"} {
		slices.Sort(phases[j])
		d := phases[j]
		fmt.Printf("| %s | %s | %s | %s |\n", what, ms(d[0]), ms(d[len(d)/2]), ms(d[len(d)-1]))
	}
	fmt.Printf("\n- target < 1 s\n\n")

	// The measured a2c up: ready, a few calls, then idle.
	u, _ := startUp(ctx, a2c, filepath.Join(tmp, "ws"), *profile)
	defer u.stop()
	for range 5 {
		check(u.echo(ctx))
	}
	time.Sleep(2 * time.Second)
	rssIdle, treeIdle := rss(u.cmd.Process.Pid), treeRSS(u.cmd.Process.Pid)

	var id atomic.Int64
	viaHTTP := func() error { return commandsEcho(u.sandbox) }
	viaMCP := func() error { return mcpEcho(u.sandbox, id.Add(1)) }
	viaA2C := func() error { return u.echo(ctx) }
	session := gatewayClient(ctx, u.hub, "2025-11-25")
	defer session.Close()
	next := gatewayClient(ctx, u.hub, "")
	defer next.Close()
	viaGateway := func() error { return gatewayEcho(ctx, session) }
	viaGatewayNext := func() error { return gatewayEcho(ctx, next) }
	viaGatewayPlain := func() error { return plainGatewayEcho(u.hub, id.Add(1)) }
	s, err := lat.Interleave(*calls, *block, viaHTTP, viaMCP, viaA2C, viaGateway, viaGatewayNext, viaGatewayPlain)
	check(err)
	h, m, a, g, gn, gp := s[0], s[1], s[2], s[3], s[4], s[5]
	fmt.Printf("### `echo hi` six ways into one a2c up process (%d calls each, interleaved in blocks of %d)\n\n", *calls, *block)
	fmt.Println("| path | p50 | p99 |")
	fmt.Println("|---|---:|---:|")
	fmt.Printf("| POST /v2/commands (sync) on the sandbox API | %s | %s |\n", lat.US(h.P50()), lat.US(h.P99()))
	fmt.Printf("| POST /mcp sandbox_execute_bash (plain JSON) on the sandbox API | %s | %s |\n", lat.US(m.P50()), lat.US(m.P99()))
	fmt.Printf("| Agent SDK -> a2c server -> Computer -> in-process sandbox | %s | %s |\n", lat.US(a.P50()), lat.US(a.P99()))
	fmt.Printf("| MCP SDK client, 2025-11-25 session -> hub /mcp (gateway) -> Computer -> sandbox | %s | %s |\n", lat.US(g.P50()), lat.US(g.P99()))
	fmt.Printf("| MCP SDK client, 2026-07-28 -> hub /mcp (gateway) -> Computer -> sandbox | %s | %s |\n", lat.US(gn.P50()), lat.US(gn.P99()))
	fmt.Printf("| plain HTTP client, 2026-07-28 (one POST, one JSON answer) -> hub /mcp (gateway) -> Computer -> sandbox | %s | %s |\n", lat.US(gp.P50()), lat.US(gp.P99()))
	fmt.Printf("\n- gateway over the Agent SDK at p50 (target <= +300 µs): plain client %s (ratio %.2fx); Go MCP SDK client at 2026-07-28 %s (%.2fx), in a 2025-11-25 session %s (%.2fx)\n",
		lat.US(gp.P50()-a.P50()), float64(gp.P50())/float64(a.P50()),
		lat.US(gn.P50()-a.P50()), float64(gn.P50())/float64(a.P50()), lat.US(g.P50()-a.P50()), float64(g.P50())/float64(a.P50()))
	fmt.Printf("\n- /mcp over the HTTP plane at p50: %s (target <= 300 µs), ratio %.2fx\n", lat.US(m.P50()-h.P50()), float64(m.P50())/float64(h.P50()))
	fmt.Printf("- A2C path over the HTTP plane at p50: %s (target <= 1 ms), ratio %.2fx; at p99: %s\n",
		lat.US(a.P50()-h.P50()), float64(a.P50())/float64(h.P50()), lat.US(a.P99()-h.P99()))
	fmt.Printf("- A2C path over /mcp (the same tool code; what the hub, the Computer and the in-memory MCP session add) at p50: %s\n\n",
		lat.US(a.P50()-m.P50()))

	time.Sleep(2 * time.Second)
	fmt.Printf("### Idle RSS of the a2c up process (target < 40 MiB)\n\n")
	fmt.Printf("- after ready and 5 calls, idle 2 s: %.1f MiB (with child processes %.1f MiB)\n", rssIdle, treeIdle)
	fmt.Printf("- after the %d calls above, idle 2 s: %.1f MiB (with child processes %.1f MiB)\n\n",
		*calls+*calls/10, rss(u.cmd.Process.Pid), treeRSS(u.cmd.Process.Pid))
}

// up is a running `a2c up` with an Agent joined to its office.
type up struct {
	cmd     *exec.Cmd
	agent   *agent.Client
	hub     string // the hub's base URL
	sandbox string // the sandbox API's base URL
}

// computer is the sandbox Computer's name (a2c up --name).
const computer = "sandbox"

// startUp starts a2c up on fresh ports and workspace and returns it with
// the times from the process start to its addresses on the log, to the
// Agent's join, and to the first tools answer that holds the sandbox's
// command tool.
func startUp(ctx context.Context, bin, ws, profile string) (*up, [3]time.Duration) {
	check(os.MkdirAll(ws, 0o755))
	args := []string{"up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--workspace", ws, "--name", computer, "--log-level", "warn"}
	if profile != "" {
		abs, err := filepath.Abs(profile)
		check(err)
		args = append(args, "--cpu-profile", abs)
	}
	cmd := exec.Command(bin, args...)
	var ph [3]time.Duration
	t0 := time.Now()
	hub, sandbox := startLogged(cmd)
	ph[0] = time.Since(t0)
	u := &up{cmd: cmd, hub: hub, sandbox: sandbox}
	for deadline := t0.Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			u.stop()
			check(fmt.Errorf("a2c up was not ready in 30 s"))
		}
		if u.agent == nil {
			a, err := agent.Dial(ctx, hub, agent.Options{Name: "bench"})
			if err != nil {
				continue
			}
			if err := a.Join(ctx, "default"); err != nil {
				a.Close()
				continue
			}
			u.agent = a
			ph[1] = time.Since(t0)
		}
		tools, err := u.agent.Tools(ctx, computer)
		if err == nil && slices.ContainsFunc(tools, func(t smcp.SMCPTool) bool { return t.Name == bashTool }) {
			ph[2] = time.Since(t0)
			return u, ph
		}
	}
}

var (
	hubRE     = regexp.MustCompile(`hub listening addr=(127\.0\.0\.1:\d+)`)
	sandboxRE = regexp.MustCompile(`sandbox_addr=(127\.0\.0\.1:\d+)`)
)

// startLogged starts cmd and waits up to 15 s for the two addresses of a2c
// up's first log lines: the hub's and the sandbox API's. The rest of its
// output is read and dropped until it exits.
func startLogged(cmd *exec.Cmd) (hub, sandbox string) {
	pr, pw, err := os.Pipe()
	check(err)
	cmd.Stdout, cmd.Stderr = pw, pw
	check(cmd.Start())
	pw.Close()
	found := make(chan [2]string, 1)
	go func() {
		defer pr.Close()
		var h, s string
		sent := false
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := hubRE.FindStringSubmatch(sc.Text()); m != nil {
				h = m[1]
			}
			if m := sandboxRE.FindStringSubmatch(sc.Text()); m != nil {
				s = m[1]
			}
			if h != "" && s != "" && !sent {
				found <- [2]string{h, s}
				sent = true
			}
		}
	}()
	select {
	case a := <-found:
		return "http://" + a[0], "http://" + a[1]
	case <-time.After(15 * time.Second):
		procs.Stop(cmd)
		check(fmt.Errorf("a2c up did not report its addresses"))
		return "", ""
	}
}

func (u *up) stop() {
	if u.agent != nil {
		u.agent.Close()
	}
	procs.Stop(u.cmd)
}

// echo runs `echo hi` through the A2C path.
func (u *up) echo(ctx context.Context) error {
	r, err := u.agent.CallTool(ctx, agent.Call{Computer: computer, Tool: bashTool, Params: map[string]any{"cmd": "echo hi"}, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	if r.IsError {
		return fmt.Errorf("a2c up: tool error: %s", r.Text())
	}
	return echoText("a2c up", r.Text())
}

// echoText checks sandbox_execute_bash's result text for `echo hi`.
func echoText(what, text string) error {
	var r struct {
		Status   string `json:"status"`
		Output   string `json:"output"`
		ExitCode *int   `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(text), &r); err != nil || r.Status != "completed" || r.ExitCode == nil || *r.ExitCode != 0 || r.Output != "hi\n" {
		return fmt.Errorf("%s echo hi: %s", what, text)
	}
	return nil
}

// gatewayClient connects the Go MCP SDK's client to the hub's gateway
// (/mcp: office default): a session at version, or with version empty
// the SDK's default, 2026-07-28 without a session.
func gatewayClient(ctx context.Context, hub, version string) *mcp.ClientSession {
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	tr := &mcp.StreamableClientTransport{Endpoint: hub + "/mcp", HTTPClient: client}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, tr, opts)
	check(err)
	return cs
}

// gatewayEcho runs `echo hi` through the hub's MCP gateway.
func gatewayEcho(ctx context.Context, cs *mcp.ClientSession) error {
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: bashTool, Arguments: map[string]any{"cmd": "echo hi"}})
	if err != nil {
		return err
	}
	if r.IsError || len(r.Content) != 1 {
		return fmt.Errorf("gateway: %+v", r)
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		return fmt.Errorf("gateway: %+v", r.Content[0])
	}
	return echoText("gateway", tc.Text)
}

// plainGatewayEcho runs `echo hi` through the hub's MCP gateway as a
// plain HTTP client of MCP 2026-07-28: one POST, one JSON answer.
func plainGatewayEcho(hub string, id int64) error {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
		"name": bashTool, "arguments": map[string]any{"cmd": "echo hi"},
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
	req, err := http.NewRequest("POST", hub+"/mcp", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {bashTool}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeToolAnswer("gateway (plain)", resp)
}

// commandsEcho runs `echo hi` through POST /v2/commands (sync).
func commandsEcho(base string) error {
	resp, err := client.Post(base+"/v2/commands", "application/json", strings.NewReader(`{"command":"echo hi"}`))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Success bool `json:"success"`
		Data    struct {
			Stdout   string `json:"stdout"`
			ExitCode *int   `json:"exit_code"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != 200 || !env.Success || env.Data.Stdout != "hi\n" || env.Data.ExitCode == nil || *env.Data.ExitCode != 0 {
		return fmt.Errorf("/v2/commands: %d %+v %v", resp.StatusCode, env, err)
	}
	return nil
}

// mcpEcho runs `echo hi` through POST /mcp as a plain JSON client.
func mcpEcho(base string, id int64) error {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": "sandbox_execute_bash", "arguments": map[string]any{"cmd": "echo hi"}}})
	resp, err := client.Post(base+"/mcp", "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeToolAnswer("/mcp", resp)
}

// decodeToolAnswer reads a JSON-RPC answer to sandbox_execute_bash's
// `echo hi`.
func decodeToolAnswer(what string, resp *http.Response) error {
	var r struct {
		Result struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 || r.Result.IsError || len(r.Result.Content) != 1 {
		return fmt.Errorf("%s: %d %+v %v", what, resp.StatusCode, r, err)
	}
	return echoText(what, r.Result.Content[0].Text)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// rss is VmRSS of pid in MiB (0 when it cannot be read).
func rss(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.Fields(v)[0])
			return float64(kb) / 1024
		}
	}
	return 0
}

// treeRSS is the VmRSS of pid and all its descendants in MiB (shared pages
// counted once per process, as VmRSS does).
func treeRSS(pid int) float64 {
	total := rss(pid)
	for _, p := range proctree.Descendants(pid) {
		total += rss(p)
	}
	return total
}
